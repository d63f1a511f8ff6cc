#!/usr/bin/env python3
"""Derives the polynomial coefficients of src/core/act_math.h and prints their error.

- portable_exp_neg: e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2, P of degree 4 (so e^r has degree 6),
  fitted for least relative error.
- normal_cdf: e^(a^2) erfc(a) = t Q(t), t = 1 / (1 + a / 2), a in [0, 15 / sqrt(2)], Q of degree
  8 (the portable math) and 6 (with the GPU's approximate exp), fitted for least relative error;
  printed halved, as the code uses them.

Both fits are least squares at Chebyshev nodes, reweighted a few dozen times toward the minimax
(equal-ripple) solution. The errors printed are of the fits in float64; act_math.h's float32
evaluation adds its roundings (tests/cpp/test_act_math.cc bounds the result).

Needs numpy and scipy (pip install numpy scipy). Run: python3 dev/fit_act_math.py
"""
import numpy as np
from scipy.special import erfcx


def reweighted_fit(x, target, degree, weight, basis_fit, evaluate, rounds=40):
    w = np.ones_like(x)
    for _ in range(rounds):
        coef = basis_fit(x, target, degree, w * weight)
        err = np.abs(evaluate(coef, x) - target) * weight
        w = w * (err / err.max()) ** 0.3
    return coef


def fit_exp(degree=6, nodes=4000):
    half = np.log(2.0) / 2 * 1.0005  # a little past ln2 / 2: n is rounded in float32
    r = half * np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    # e^r = 1 + r + r^2 P(r): fit P to (e^r - 1 - r) / r^2 (expm1 keeps it accurate near 0).
    target = (np.expm1(r) - r) / (r * r)
    weight = r * r / np.exp(r)  # an error in P, relative to e^r
    poly = np.polynomial.polynomial
    coef = reweighted_fit(r, target, degree - 2, weight,
                          lambda x, y, d, w: poly.polyfit(x, y, d, w=w),
                          lambda c, x: poly.polyval(x, c))
    dense = np.linspace(-half, half, 200001)
    approx = 1 + dense + dense * dense * poly.polyval(dense, coef)
    return coef, np.abs(approx / np.exp(dense) - 1).max()


def fit_normal_cdf(degree=8, nodes=3000):
    a_max = 15 / np.sqrt(2)
    t_min = 1 / (1 + a_max / 2)
    k = np.arange(nodes)
    t = (t_min + 1) / 2 + (1 - t_min) / 2 * np.cos(np.pi * (k + 0.5) / nodes)
    target = erfcx(2 * (1 / t - 1)) / t  # Q(t) = e^(a^2) erfc(a) / t
    cheb = np.polynomial.chebyshev.Chebyshev

    def cheb_fit(x, y, d, w):
        return cheb.fit(x, y, d, domain=[t_min, 1], w=w)

    series = reweighted_fit(t, target, degree, 1 / target, cheb_fit, lambda c, x: c(x))
    coef = series.convert(kind=np.polynomial.Polynomial, domain=[t_min, 1],
                          window=[t_min, 1]).coef
    dense = np.linspace(t_min, 1, 400001)
    exact = erfcx(2 * (1 / dense - 1)) / dense
    return coef, np.abs(np.polynomial.polynomial.polyval(dense, coef) / exact - 1).max()


def main():
    coef, err = fit_exp()
    print(f"e^r: relative error {err:.2e}; coefficients of r^2 .. r^6:")
    print("  " + ", ".join(f"{c:.9e}" for c in coef))
    for degree in (8, 6):
        coef, err = fit_normal_cdf(degree)
        print(f"Q(t) / 2, degree {degree}: relative error {err:.2e}; coefficients, highest first:")
        print("  " + ", ".join(f"{c / 2:.9e}" for c in coef[::-1]))


if __name__ == "__main__":
    main()
