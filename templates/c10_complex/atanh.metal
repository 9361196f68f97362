// Inverse hyperbolic tangent of a complex value (x real, y imaginary), as C99
// Annex G and glibc's catanhf (the CPU's std::atanh on Linux) compute it: odd
// and conjugate-symmetric, so on the branch cuts (the real axis beyond +-1) the
// sign of a zero imaginary part picks the side; +-1 gives an infinite real
// part; NaN and infinities as catanh gives them. Computed in float.
inline float2 atanh(float2 z) {
  const float x = z.x, y = z.y;
  if (::metal::isinf(y)) {
    return float2(::metal::copysign(0.0f, x), ::metal::copysign(M_PI_F / 2, y));
  }
  if (::metal::isinf(x) || (x == 0 && ::metal::isnan(y))) {
    return float2(
        ::metal::copysign(0.0f, x),
        ::metal::isnan(y) ? NAN : ::metal::copysign(M_PI_F / 2, y));
  }
  if (::metal::isnan(x) || ::metal::isnan(y)) {
    return float2(NAN, NAN);
  }
  // on the first quadrant; the signs of x and y go back on at the end
  const float ax = ::metal::abs(x), ay = ::metal::abs(y);
  float re, im;
  if (::metal::max(ax, ay) > 4194304.0f) {
    // |z| > 2^22: atanh(z) = 1/z + i pi/2 + O(1/z^3), and the squares below
    // would overflow
    const float big = ::metal::max(ax, ay), ratio = ::metal::min(ax, ay) / big;
    const float norm = big * (1 + ratio * ratio); // |z|^2 / big
    re = (ax / big) / norm;
    im = M_PI_F / 2 - (ay / big) / norm;
  } else {
    // atanh(z) = log((1 + z) / (1 - z)) / 2; its real part, taken as
    // log1p(4x / d) / 4 with d = |1 - z|^2, keeps its digits for small x
    const float gap = 1 - ax;
    const float d = gap * gap + ay * ay;
    if (ax == 1 && ay < 1e-18f) {
      // z = +-1 (+ a y whose square vanishes): |1 + z|^2 / |1 - z|^2 = 4 / y^2
      re = (M_LN2_F - ::metal::precise::log(ay)) / 2;
    } else {
      const float t = 4 * ax / d, u = 1 + t;
      // log1p(t), exact where 1 + t rounds to 1
      re = (u == 1 ? t : ::metal::precise::log(u) * (t / (u - 1))) / 4;
    }
    im = ::metal::precise::atan2(2 * ay, gap * (1 + ax) - ay * ay) / 2;
  }
  return float2(::metal::copysign(re, x), ::metal::copysign(im, y));
}
