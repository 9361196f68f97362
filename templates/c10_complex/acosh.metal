// Inverse hyperbolic cosine of a complex value (x real, y imaginary), as C99
// Annex G and glibc's cacoshf (the CPU's std::acosh on Linux) compute it; a
// Mac's libc++ (a textbook formula in float) cancels for a negative real part
// and overflows beyond |z| ~ 1.8e19 where this does not: real part >= 0,
// conjugate-symmetric, so on the branch cut (the real axis below 1) the sign of
// a zero imaginary part picks the side; NaN and infinities as cacosh gives
// them. Computed in float.
inline float2 acosh(float2 z) {
  const float x = z.x, y = z.y;
  if (::metal::isinf(y)) {
    const float im = ::metal::isnan(x) ? NAN
        : ::metal::isinf(x)            ? (x < 0 ? 0.75f * M_PI_F : M_PI_F / 4)
                                       : M_PI_F / 2;
    return float2(INFINITY, ::metal::copysign(im, y));
  }
  if (::metal::isinf(x)) {
    const float im = ::metal::isnan(y) ? NAN : x < 0 ? M_PI_F : 0.0f;
    return float2(INFINITY, ::metal::copysign(im, y));
  }
  if (::metal::isnan(x) || ::metal::isnan(y)) {
    return float2(NAN, NAN);
  }
  // on the upper half plane; the sign of y goes back on at the end
  const float ay = ::metal::abs(y);
  float re, im;
  if (::metal::max(::metal::abs(x), ay) > 4194304.0f) {
    // |z| > 2^22: acosh(z) = log(2z) + O(1/z^2), and the squares below would
    // overflow
    const float big = ::metal::max(::metal::abs(x), ay);
    const float ratio = ::metal::min(::metal::abs(x), ay) / big;
    re = ::metal::precise::log(big) +
        ::metal::precise::log(1 + ratio * ratio) / 2 + M_LN2_F;
    im = ::metal::precise::atan2(ay, x);
  } else {
    // w = z + sqrt(z + 1) * sqrt(z - 1): two principal square roots (imaginary
    // parts >= 0) put the cut below 1 on the right side, and on this half plane
    // their product points where z does, so nothing cancels in the sum
    float root_re[2], root_im[2];
    for (int k = 0; k < 2; ++k) {
      const float s_re = k == 0 ? x + 1 : x - 1;
      const float scale = ::metal::max(::metal::abs(s_re), ay);
      // the modulus, scaled so that tiny parts do not underflow when squared
      const float u = scale == 0 ? 0.0f : s_re / scale;
      const float v = scale == 0 ? 0.0f : ay / scale;
      const float m = scale * ::metal::precise::sqrt(u * u + v * v);
      if (s_re >= 0) {
        root_re[k] = ::metal::precise::sqrt((m + s_re) / 2);
        root_im[k] = root_re[k] == 0 ? 0.0f : ay / (2 * root_re[k]);
      } else {
        root_im[k] = ::metal::precise::sqrt((m - s_re) / 2);
        root_re[k] = ay / (2 * root_im[k]);
      }
    }
    const float w_re = x + root_re[0] * root_re[1] - root_im[0] * root_im[1];
    const float w_im = ay + root_re[0] * root_im[1] + root_im[0] * root_re[1];
    re = ::metal::precise::log(w_re * w_re + w_im * w_im) / 2;
    im = ::metal::precise::atan2(w_im, w_re);
  }
  return float2(re, ::metal::copysign(im, y));
}
