// Metal's half literals (`0.1h`, `1.0H`) as Apple's clang reads them: the literal's exact value
// rounded to half once, ties to even. A cooked `operator""h(long double)` rounds twice (to the
// long double, then to half), which differs where the literal lies within 2^-64 of a tie
// between two halves (review 36's K01; 37's N04, such a literal in a header, and N07, one made
// by token pasting): so the literal's characters are read, whole, at compile time. A decimal
// literal: its first 19 significant digits place it between two halves, and an exact comparison
// of all its digits with the midpoint between them decides; a hexadecimal one: its bits. C++14
// digit separators are skipped. The answer is a float that holds the half exactly.
#pragma once

namespace porter_half_literal {
typedef unsigned __int128 u128;
struct Parsed {
  int first = 0, last = 0;  // the mantissa's characters [first, last)
  long exponent = 0;        // the `e`/`p` part's
  bool hex = false;
};
constexpr bool is_digit(char c, bool hex) {
  return (c >= '0' && c <= '9') || (hex && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')));
}
constexpr int digit(char c) {
  return c <= '9' ? c - '0' : (c >= 'a' ? c - 'a' + 10 : c - 'A' + 10);
}
constexpr Parsed parse(const char* s, int n) {
  Parsed p;
  int i = 0;
  if (n > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    p.hex = true;
    i = 2;
  }
  p.first = i;
  while (i < n && (is_digit(s[i], p.hex) || s[i] == '.' || s[i] == '\'')) ++i;
  p.last = i;
  if (i < n && (s[i] == 'e' || s[i] == 'E' || s[i] == 'p' || s[i] == 'P')) {
    ++i;
    bool negative = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
    long e = 0;
    for (; i < n; ++i)
      if (s[i] != '\'') e = e > 100000 ? e : e * 10 + (s[i] - '0');
    p.exponent = negative ? -e : e;
  }
  return p;
}
// a decimal mantissa's significant digits d1 d2 ...: V = 0.d1d2... x 10^point (times the
// exponent part's power)
struct Digits {
  const char* s;
  Parsed p;
  int count = 0;
  long point = 0;
};
constexpr Digits digits(const char* s, Parsed p) {
  Digits d{s, p};
  bool seen = false, after = false;
  long before_point = 0, zeros_after_point = 0;
  for (int i = p.first; i < p.last; ++i) {
    char c = s[i];
    if (c == '\'') continue;
    if (c == '.') { after = true; continue; }
    if (!seen && c == '0') {
      if (after) ++zeros_after_point;
      continue;
    }
    seen = true;
    ++d.count;
    if (!after) ++before_point;
  }
  d.point = seen ? (before_point > 0 ? before_point : -zeros_after_point) : 0;
  return d;
}
// the k-th significant digit (0-based)
constexpr int nth(const Digits& d, int k) {
  bool seen = false;
  int at = 0;
  for (int i = d.p.first; i < d.p.last; ++i) {
    char c = d.s[i];
    if (c == '\'' || c == '.') continue;
    if (!seen && c == '0') continue;
    seen = true;
    if (at++ == k) return digit(c);
  }
  return 0;
}
constexpr u128 pow10(int k) {
  u128 r = 1;
  for (int i = 0; i < k; ++i) r *= 10;
  return r;
}
// values are counted in units of 2^-25, half the least half: below 65520 (inf from there),
// fewer than 2^42 of them
constexpr float from_units(u128 units) { return float(units) * 0x1p-25f; }
constexpr int high_bit(u128 x) {
  int b = -1;
  while (x) { x >>= 1; ++b; }
  return b;
}
// the distance between the halves around `units`: 2^-24 below the normal halves
constexpr u128 spacing(u128 units) {
  int b = high_bit(units);
  return b >= 11 ? u128(1) << (b - 10) : u128(2);
}
// the decimal literal against Z x 10^-26: -1, 0 or 1
constexpr int compare_decimal(const Digits& d, long point, u128 z) {
  char zd[48] = {};
  int zn = 0;
  for (u128 t = z; t; t /= 10) zd[zn++] = char(t % 10);
  long zpoint = zn - 26;
  if (point != zpoint) return point > zpoint ? 1 : -1;
  int n = d.count > zn ? d.count : zn;
  for (int k = 0; k < n; ++k) {
    int a = k < d.count ? nth(d, k) : 0;
    int b = k < zn ? zd[zn - 1 - k] : 0;
    if (a != b) return a > b ? 1 : -1;
  }
  return 0;
}
constexpr float decimal(const char* s, Parsed p) {
  Digits d = digits(s, p);
  if (d.count == 0) return 0.0f;
  long point = d.point + p.exponent;
  if (point > 5) return __builtin_inff();      // V >= 10^5
  if (point < -8) return 0.0f;                  // V < 10^-9, below half the least half
  // the first 19 digits: V_t <= V < V_t + 10^(point - 19), V_t in units floor(m x 2^25 /
  // 10^(19 - point)), 19 - point in [14, 27]; the halves around V_t are those around V, unless
  // V lies across their midpoint, which the comparison of every digit says
  u128 m = 0;
  for (int k = 0; k < 19; ++k) m = m * 10 + u128(nth(d, k));
  u128 units = (m << 25) / pow10(int(19 - point));
  u128 step = spacing(units);
  u128 q = units / step;
  // the midpoint above q x step: (2q + 1) x step x 2^-26 = Z x 10^-26
  u128 z = (2 * q + 1) * step;
  for (int i = 0; i < 26; ++i) z *= 5;
  int side = compare_decimal(d, point, z);
  if (side > 0 || (side == 0 && (q & 1))) ++q;
  return from_units(q * step);
}
// V = m x 2^shift, m its first 30 hexadecimal digits, `sticky` whether a later one is not 0:
// a midpoint has fewer bits than m, so m and the sticky bit round as V does
constexpr float hexadecimal(const char* s, Parsed p) {
  u128 m = 0;
  int kept = 0;
  long shift = p.exponent;
  bool sticky = false, after = false;
  for (int i = p.first; i < p.last; ++i) {
    char c = s[i];
    if (c == '\'') continue;
    if (c == '.') { after = true; continue; }
    if (m == 0 && c == '0') { if (after) shift -= 4; continue; }
    if (kept < 30) {
      m = m * 16 + u128(digit(c));
      ++kept;
      if (after) shift -= 4;
    } else {
      sticky = sticky || c != '0';
      if (!after) shift += 4;
    }
  }
  if (m == 0) return 0.0f;
  long top = high_bit(m) + shift;               // 2^top <= V < 2^(top + 1)
  if (top >= 16) return __builtin_inff();
  if (top < -26) return 0.0f;
  long k = shift + 25;
  u128 units = 0, rest = 0;
  if (k >= 0) {
    units = m << k;
  } else {
    units = -k >= 128 ? 0 : m >> -k;
    rest = -k >= 128 ? m : m & ((u128(1) << -k) - 1);
  }
  sticky = sticky || rest != 0;
  u128 step = spacing(units);
  u128 q = units / step, r = units % step, half = step / 2;
  if (r > half || (r == half && (sticky || (q & 1)))) ++q;
  return from_units(q * step);
}
template <char... C>
constexpr float value() {
  constexpr char s[] = {C..., '\0'};
  constexpr Parsed p = parse(s, int(sizeof...(C)));
  return p.hex ? hexadecimal(s, p) : decimal(s, p);
}
}  // namespace porter_half_literal

// Literal suffixes without `_` are reserved in C++ (a warning, silenced by -w); Metal's own.
template <char... C>
constexpr _Float16 operator""h() {
  constexpr float v = porter_half_literal::value<C...>();
  return static_cast<_Float16>(v);
}
template <char... C>
constexpr _Float16 operator""H() {
  constexpr float v = porter_half_literal::value<C...>();
  return static_cast<_Float16>(v);
}
