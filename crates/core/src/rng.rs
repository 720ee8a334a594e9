//! A deterministic random generator.
//!
//! worldmesh promises "same seed ⇒ same run, byte for byte" (BRIEF §2.2). General-purpose
//! RNG crates may change their streams between versions, so the simulator and the protocol
//! code use this small, fully specified generator instead: xoshiro256++ (Blackman and
//! Vigna, 2018) seeded through SplitMix64. It is fast, has a 2²⁵⁶ − 1 period and passes
//! BigCrush; it is **not** cryptographically secure and must not be used for secrets.
//!
//! [`DetRng::fork`] derives independent child streams (one per node, per link, …) so that
//! adding a consumer does not shift the numbers every other consumer sees.

/// Deterministic pseudo-random generator (xoshiro256++).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetRng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl DetRng {
    /// A generator seeded from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        Self { s }
    }

    /// An independent child stream identified by `stream`; does not advance `self`.
    pub fn fork(&self, stream: u64) -> Self {
        let mut st = self.s[0] ^ self.s[2].rotate_left(17) ^ stream.wrapping_mul(0xA076_1D64_78BD_642F);
        let mut child = [0u64; 4];
        for c in &mut child {
            *c = splitmix64(&mut st);
        }
        Self { s: child }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[0]
            .wrapping_add(self.s[3])
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `[0, n)`; returns 0 when `n == 0`. Unbiased (Lemire's method
    /// with rejection).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Uniform index in `[0, n)` (0 when `n == 0`).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `[lo, hi)` (returns `lo` when the range is empty).
    pub fn range_f64(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            lo
        } else {
            lo + (hi - lo) * self.next_f64()
        }
    }

    /// Uniform `f32` in `[lo, hi)`.
    pub fn range_f32(&mut self, lo: f32, hi: f32) -> f32 {
        self.range_f64(f64::from(lo), f64::from(hi)) as f32
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (p >= 1.0 || self.next_f64() < p)
    }

    /// Standard normal deviate (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Exponential deviate with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// Gamma deviate with `shape > 0` and `scale > 0` (Marsaglia and Tsang, 2000; shapes
    /// below 1 use the boost `G(a) = G(a + 1) · U^{1/a}`). Returns 0 for invalid parameters.
    pub fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        if !(shape > 0.0 && scale > 0.0 && shape.is_finite() && scale.is_finite()) {
            return 0.0;
        }
        if shape < 1.0 {
            let u = 1.0 - self.next_f64();
            return self.gamma(shape + 1.0, scale) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = 1.0 - self.next_f64();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v * scale;
            }
        }
    }

    /// A uniformly chosen element, or `None` for an empty slice.
    pub fn choose<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.index(items.len())])
        }
    }

    /// Fisher–Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.index(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_forks_differ() {
        let mut a = DetRng::new(42);
        let mut b = DetRng::new(42);
        let xs: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let root = DetRng::new(7);
        let mut f1 = root.fork(1);
        let mut f2 = root.fork(2);
        assert_ne!(f1.next_u64(), f2.next_u64());
        assert_eq!(root.fork(1), root.fork(1));
        assert_ne!(DetRng::new(1).next_u64(), DetRng::new(2).next_u64());
    }

    #[test]
    fn distributions_have_expected_moments() {
        let mut r = DetRng::new(3);
        let n = 200_000;
        let mean_u: f64 = (0..n).map(|_| r.next_f64()).sum::<f64>() / n as f64;
        assert!((mean_u - 0.5).abs() < 0.01, "{mean_u}");
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[r.index(7)] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        let norm: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let m = norm.iter().sum::<f64>() / n as f64;
        let v = norm.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.02 && (v - 1.0).abs() < 0.02, "{m} {v}");
        // Gamma(k, θ): mean kθ, variance kθ².
        for (k, th) in [(1.157143, 2.419754), (0.5, 2.0), (3.0, 1.0)] {
            let g: Vec<f64> = (0..n).map(|_| r.gamma(k, th)).collect();
            let m = g.iter().sum::<f64>() / n as f64;
            let v = g.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
            assert!(
                (m - k * th).abs() / (k * th) < 0.02,
                "gamma mean {m} for {k},{th}"
            );
            assert!((v - k * th * th).abs() / (k * th * th) < 0.05, "gamma var {v}");
        }
        let e = (0..n).map(|_| r.exponential(3.0)).sum::<f64>() / n as f64;
        assert!((e - 3.0).abs() < 0.05, "{e}");
        assert_eq!(r.below(0), 0);
        assert!(!r.chance(0.0) && r.chance(1.0));
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut r = DetRng::new(9);
        let mut v: Vec<u32> = (0..50).collect();
        r.shuffle(&mut v);
        let mut s = v.clone();
        s.sort_unstable();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(v, s);
    }
}
