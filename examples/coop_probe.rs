//! Probe of cooperative-matrix (tensor core) support through wgpu: lists the adapter's
//! configurations, checks one 16x16x16 f16 x f16 + f32 product against the CPU, and times a
//! plain f16 GEMM (no shared memory) at 4096^3. Prints numbers only.
//!
//! `cargo run --release --example coop_probe`

use std::time::Instant;

const KERNEL: &str = r#"
enable f16;
enable wgpu_cooperative_matrix;

struct P { m: u32, n: u32, k: u32, tiles_n: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<f16>;   // M x K, row-major
@group(0) @binding(2) var<storage, read> w: array<f16>;   // N x K, row-major (B = W^T)
@group(0) @binding(3) var<storage, read_write> c: array<f32>; // M x N, row-major

// One subgroup per workgroup computes a 32 x 32 block of C as 2 x 2 fragments.
@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wg: vec3<u32>) {
    let m0 = (wg.x / p.tiles_n) * 32u;
    let n0 = (wg.x % p.tiles_n) * 32u;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    for (var k0 = 0u; k0 < p.k; k0 += 16u) {
        let a0 = coopLoadT<coop_mat16x16<f16, A>>(&a[m0 * p.k + k0], p.k);
        let a1 = coopLoadT<coop_mat16x16<f16, A>>(&a[(m0 + 16u) * p.k + k0], p.k);
        let b0 = coopLoad<coop_mat16x16<f16, B>>(&w[n0 * p.k + k0], p.k);
        let b1 = coopLoad<coop_mat16x16<f16, B>>(&w[(n0 + 16u) * p.k + k0], p.k);
        c00 = coopMultiplyAdd(a0, b0, c00);
        c01 = coopMultiplyAdd(a0, b1, c01);
        c10 = coopMultiplyAdd(a1, b0, c10);
        c11 = coopMultiplyAdd(a1, b1, c11);
    }
    coopStoreT(c00, &c[m0 * p.n + n0], p.n);
    coopStoreT(c01, &c[m0 * p.n + n0 + 16u], p.n);
    coopStoreT(c10, &c[(m0 + 16u) * p.n + n0], p.n);
    coopStoreT(c11, &c[(m0 + 16u) * p.n + n0 + 16u], p.n);
}
"#;

fn main() {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .expect("adapter");
    let info = adapter.get_info();
    println!("adapter: {} ({:?})", info.name, info.backend);
    for p in adapter.cooperative_matrix_properties() {
        println!("coop: {}x{}x{} {:?} -> {:?}", p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type);
    }
    let want = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16;
    if !adapter.features().contains(want) {
        println!("cooperative matrix or f16 not available: {:?}", adapter.features() & want);
        return;
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: want,
        required_limits: adapter.limits(),
        // SAFETY: only the cooperative-matrix feature is experimental; this probe checks its results.
        experimental_features: unsafe { wgpu::ExperimentalFeatures::enabled() },
        ..Default::default()
    }))
    .expect("device");
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("coop"),
        source: wgpu::ShaderSource::Wgsl(KERNEL.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("coop"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    for &(m, n, k, reps) in &[(32usize, 32usize, 32usize, 1usize), (4096, 4096, 4096, 20)] {
        let av: Vec<half::f16> = (0..m * k).map(|i| half::f16::from_f32(((i * 7 % 13) as f32 - 6.0) / 8.0)).collect();
        let wv: Vec<half::f16> = (0..n * k).map(|i| half::f16::from_f32(((i * 5 % 11) as f32 - 5.0) / 4.0)).collect();
        use wgpu::util::DeviceExt;
        let mk = |d: &[u8], u: wgpu::BufferUsages| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: None, contents: d, usage: u })
        };
        let pu = mk(bytemuck::cast_slice(&[m as u32, n as u32, k as u32, (n / 32) as u32]), wgpu::BufferUsages::UNIFORM);
        let ab = mk(bytemuck::cast_slice(&av), wgpu::BufferUsages::STORAGE);
        let wb = mk(bytemuck::cast_slice(&wv), wgpu::BufferUsages::STORAGE);
        let cb = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (m * n * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let rb = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (m * n * 4) as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bg = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: pu.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: ab.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: wb.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 3, resource: cb.as_entire_binding() },
            ],
        });
        let run = |reps: usize| {
            let mut e = device.create_command_encoder(&Default::default());
            {
                let mut pass = e.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bg, &[]);
                for _ in 0..reps {
                    pass.dispatch_workgroups(((m / 32) * (n / 32)) as u32, 1, 1);
                }
            }
            e.copy_buffer_to_buffer(&cb, 0, &rb, 0, (m * n * 4) as u64);
            let t = Instant::now();
            queue.submit([e.finish()]);
            device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
            t.elapsed().as_secs_f64()
        };
        run(1);
        let t = run(reps) / reps as f64;
        rb.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let got: Vec<f32> = bytemuck::cast_slice(&rb.slice(..).get_mapped_range().expect("mapped")).to_vec();
        let mut max_err = 0f32;
        for (i, j) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3), (1, n - 2)] {
            let want: f32 = (0..k).map(|kk| av[i * k + kk].to_f32() * wv[j * k + kk].to_f32()).sum();
            max_err = max_err.max((got[i * n + j] - want).abs());
        }
        println!("coop {m}x{n}x{k}: max |err| at 4 points {max_err:.3e}, {:.1} us, {:.1} TFLOP/s", t * 1e6, 2.0 * (m * n * k) as f64 / t / 1e12);
    }
}
