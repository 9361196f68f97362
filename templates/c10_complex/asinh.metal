// Inverse hyperbolic sine of a complex value (x real, y imaginary), as C99
// Annex G and glibc's casinhf (the CPU's std::asinh on Linux) compute it; a
// Mac's libc++ (a textbook formula in float) cancels for a negative real part
// and overflows beyond |z| ~ 1.8e19 where this does not: odd and
// conjugate-symmetric, so on the branch cuts (the imaginary axis beyond +-i)
// the sign of a zero real part picks the side; NaN and infinities as casinh
// gives them. Computed in float.
inline float2 asinh(float2 z) {
  const float x = z.x, y = z.y;
  if (::metal::isinf(y)) {
    const float im = ::metal::isnan(x) ? NAN
        : ::metal::isinf(x)            ? M_PI_F / 4
                                       : M_PI_F / 2;
    return float2(::metal::copysign(INFINITY, x), ::metal::copysign(im, y));
  }
  if (::metal::isinf(x) || ::metal::isnan(x)) {
    const bool real_axis = ::metal::isinf(x) ? !::metal::isnan(y) : y == 0;
    return float2(x, real_axis ? ::metal::copysign(0.0f, y) : NAN);
  }
  if (::metal::isnan(y)) {
    return float2(NAN, NAN);
  }
  // on the first quadrant; the signs of x and y go back on at the end
  const float ax = ::metal::abs(x), ay = ::metal::abs(y);
  float re, im;
  if (::metal::max(ax, ay) > 4194304.0f) {
    // |z| > 2^22: asinh(z) = log(2z) + O(1/z^2), and z * z below would overflow
    const float big = ::metal::max(ax, ay), ratio = ::metal::min(ax, ay) / big;
    re = ::metal::precise::log(big) +
        ::metal::precise::log(1 + ratio * ratio) / 2 + M_LN2_F;
    im = ::metal::precise::atan2(ay, ax);
  } else {
    // w = z + sqrt(z * z + 1), where nothing cancels on this quadrant; the
    // real part of z * z + 1 as x * x + (1 - y) * (1 + y) keeps its digits
    // near z = i
    const float s_re = ax * ax + (1 - ay) * (1 + ay), s_im = 2 * ax * ay;
    // the modulus of s, scaled so that tiny parts do not underflow when squared
    const float scale = ::metal::max(::metal::abs(s_re), s_im);
    const float u = scale == 0 ? 0.0f : s_re / scale;
    const float v = scale == 0 ? 0.0f : s_im / scale;
    const float m = scale * ::metal::precise::sqrt(u * u + v * v);
    // the principal square root of s (imaginary part >= 0), cancelling nothing
    float r_re, r_im;
    if (s_re >= 0) {
      r_re = ::metal::precise::sqrt((m + s_re) / 2);
      r_im = r_re == 0 ? 0.0f : s_im / (2 * r_re);
    } else {
      r_im = ::metal::precise::sqrt((m - s_re) / 2);
      r_re = s_im / (2 * r_im);
    }
    const float w_re = ax + r_re, w_im = ay + r_im;
    re = ::metal::precise::log(w_re * w_re + w_im * w_im) / 2;
    im = ::metal::precise::atan2(w_im, w_re);
  }
  return float2(::metal::copysign(re, x), ::metal::copysign(im, y));
}
