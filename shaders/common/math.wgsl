// Scalar helpers shared by kernels.

// tanh from exp alone: drivers' tanh builtins range from exact to approximate, and some
// return NaN for large |z| by overflowing exp. This one is within 3e-7 relative of libm's
// wherever exp is accurate. Small |z| uses the series, where 1 - e^(-2|z|) would cancel.
fn tanh_safe(z: f32) -> f32 {
    let a = min(abs(z), 10.0); // tanh(10) is 1 in f32
    var t: f32;
    if (a < 0.25) {
        let a2 = a * a;
        t = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0 + a2 * (62.0 / 2835.0)))));
    } else {
        let e = exp(-2.0 * a);
        t = (1.0 - e) / (1.0 + e);
    }
    return select(t, -t, z < 0.0);
}

// GELU, tanh approximation (gelu_pytorch_tanh), in the reference's operation order.
fn gelu_tanh(x: f32) -> f32 {
    let k = 0.7978845608028654; // sqrt(2/pi)
    return 0.5 * x * (1.0 + tanh_safe(k * (x + 0.044715 * x * x * x)));
}
