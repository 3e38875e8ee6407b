// Gemma 4's per-layer-embedding gate for one token (decode) without a dispatch of its own,
// in two matvec.wgsl kernels (header: PLE_ACC or PLE_GATE, PD = the gate's width, PH = the
// hidden size), each composing this file and its part. A layer ends with
//   h2 = h + RMS(d) ⊙ w_post,  d = W_down · a,   g = gelu_tanh(W_gate · h2) ⊙ e,   u = W_proj · g
// and W_gate · h2 = H + rms(d)^-1 · D with H = Σ_r W_gate[:, r] · h[r] and D = Σ_r
// W_gate[:, r] · w_post[r] · d[r], sums over the hidden rows r that the down projection's
// workgroups own. So:
// - matvec_ple_acc.wgsl (the down projection): each workgroup adds its rows' terms of H
//   and D (from Gt = W_gateᵀ in f32, made at load) into the sums with atomic adds;
// - matvec_ple_gate.wgsl (the per-layer projection W_proj): every workgroup reads the
//   sums, reduces rms(d) from d and makes g as its input; its first workgroup stores h2.
// The gate's matvec and its dispatch leave the chain (H200, decode tg64 after 16 tokens:
// E2B +1.8%, E4B +3.0%; docs/performance-log.md, fifty-fourth session). Its bound, the
// dispatch left out with nothing added, was +10%: the sums' atomic adds, their reads and
// the down projection's extra loads take most of it.
//
// The sums are 64-bit fixed point (FX = 2^32 per unit): integer adds give the same
// result in any order, so decode stays reproducible. A copy holds sums of up to 2^31 in
// size (a gate's pre-activations are orders of magnitude smaller; past that it would
// wrap). A term is clamped to ±1e9 (its conversion stays defined) and rounded to 2^-32, so
// a sum of n terms is within n · 2^-33 of the f32 terms' exact sum. COPIES copies (a
// header constant, `matmul::PLE_COPIES`), taken by workgroup index, keep the adds to any
// one address few; the reader adds them. Layout from p.acc_off (in i64s): COPIES × [H
// (PD) | D (PD)].

const FX: f32 = 4294967296.0;
const FX_INV: f32 = 2.3283064365386963e-10;
