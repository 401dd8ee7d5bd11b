//! Request counts and latencies per API face (Nacos v1, v2 and v3 HTTP, gRPC, roster's
//! own `/api/v1`, Eureka's and Consul's APIs), for the overview's charts
//! (`metrics::history`).
//!
//! Each face keeps a fixed set of latency buckets, plain atomic counters that only grow:
//! a request adds one to one bucket (a relaxed `fetch_add`, no lock, no allocation; the
//! route's Prometheus histogram beside it takes a lock). The sampler reads every bucket
//! every 5 s and takes the request rate and the 99th percentile from the differences
//! between two readings, so the figures are those of the last interval alone.
//!
//! The buckets are log-spaced: below 4 µs one per microsecond, then four per doubling
//! (bounds 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... µs), so a bucket is at most 25 % wide and
//! the percentile, interpolated inside its bucket, is within that of the truth. The last
//! bucket starts at 58.7 s and takes everything slower.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Latency buckets per face.
pub const BUCKETS: usize = 100;

/// An API face.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Face {
    /// HTTP routes under `/nacos/v1/`.
    V1,
    /// HTTP routes under `/nacos/v2/`.
    V2,
    /// Nacos 2.x gRPC requests (unary; the bi-directional stream is not a request).
    Grpc,
    /// HTTP routes under `/api/v1/` (roster's own API and the console's).
    Api,
    /// HTTP routes under `/nacos/v3/`.
    V3,
    /// Eureka's API (`/eureka/`, `/nacos/eureka/`).
    Eureka,
    /// Consul's API (`/v1/`).
    Consul,
}

/// How many faces there are.
pub const FACES: usize = 7;

impl Face {
    /// Every face, in the order [`Faces`] keeps them.
    pub const ALL: [Face; FACES] = [
        Face::V1,
        Face::V2,
        Face::Grpc,
        Face::Api,
        Face::V3,
        Face::Eureka,
        Face::Consul,
    ];

    /// The face of an HTTP route (a route pattern, as the metrics label it: Eureka's
    /// under `/nacos/eureka/` are labelled `/eureka/...`); `None` for the operations
    /// routes (`/metrics`, `/health/*`), Prometheus service discovery and `unmatched`.
    pub fn of_route(route: &str) -> Option<Face> {
        if route.starts_with("/nacos/v1/") {
            Some(Face::V1)
        } else if route.starts_with("/nacos/v2/") {
            Some(Face::V2)
        } else if route.starts_with("/api/v1/") {
            Some(Face::Api)
        } else if route.starts_with("/nacos/v3/") {
            Some(Face::V3)
        } else if route.starts_with("/eureka/") {
            Some(Face::Eureka)
        } else if route.starts_with("/v1/") {
            Some(Face::Consul)
        } else {
            None
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Cumulative bucket counts of every face, as read at one moment.
pub type Readings = [[u64; BUCKETS]; FACES];

/// The latency buckets of every face.
pub struct Faces {
    buckets: [[AtomicU64; BUCKETS]; FACES],
}

impl Default for Faces {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
        }
    }
}

impl Faces {
    /// Counts one request of `face` that took `elapsed`.
    pub fn observe(&self, face: Face, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.buckets[face.index()][bucket_of(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// Times a request of `face` from now until the returned guard is dropped (also
    /// when the request's future is dropped unfinished: the client went away).
    pub fn timer(&self, face: Face) -> Timer<'_> {
        Timer {
            faces: self,
            face,
            started: Instant::now(),
        }
    }

    /// Every bucket's count now. Buckets are read one by one while requests go on: a
    /// request counted during the read shows in this reading or the next, never twice.
    pub fn read(&self) -> Box<Readings> {
        let mut out = Box::new([[0; BUCKETS]; FACES]);
        for (face, buckets) in self.buckets.iter().enumerate() {
            for (i, bucket) in buckets.iter().enumerate() {
                out[face][i] = bucket.load(Ordering::Relaxed);
            }
        }
        out
    }
}

/// Counts the request it was made for into its face when dropped.
pub struct Timer<'a> {
    faces: &'a Faces,
    face: Face,
    started: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.faces.observe(self.face, self.started.elapsed());
    }
}

/// The bucket of a latency of `micros` µs.
pub fn bucket_of(micros: u64) -> usize {
    if micros < 4 {
        return micros as usize;
    }
    // The position of the leading one (2 or more here) and the two bits after it.
    let exponent = 63 - micros.leading_zeros() as usize;
    let mantissa = ((micros >> (exponent - 2)) & 3) as usize;
    (4 + (exponent - 2) * 4 + mantissa).min(BUCKETS - 1)
}

/// The bounds of bucket `i`, µs: from `lower` (included) to `upper` (excluded).
pub fn bounds(i: usize) -> (u64, u64) {
    if i < 4 {
        return (i as u64, i as u64 + 1);
    }
    let (shift, mantissa) = ((i - 4) / 4, ((i - 4) % 4) as u64);
    ((4 + mantissa) << shift, (5 + mantissa) << shift)
}

/// Requests counted between two readings of one face's buckets, and their 99th
/// percentile latency in milliseconds (`None` when there were none): found in the
/// bucket that holds the request of rank ⌈0.99 n⌉, interpolated linearly inside it.
pub fn p99_between(before: &[u64; BUCKETS], after: &[u64; BUCKETS]) -> (u64, Option<f64>) {
    let deltas: Vec<u64> = after
        .iter()
        .zip(before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let total: u64 = deltas.iter().sum();
    if total == 0 {
        return (0, None);
    }
    let rank = ((total as f64 * 0.99).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, n) in deltas.iter().enumerate().filter(|(_, n)| **n > 0) {
        if seen + n >= rank {
            let (lower, upper) = bounds(i);
            let within = (rank - seen) as f64 / *n as f64;
            let micros = lower as f64 + (upper - lower) as f64 * within;
            return (total, Some(micros / 1000.0));
        }
        seen += n;
    }
    unreachable!("rank {rank} is at most the total {total}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_at_most_a_quarter_wide() {
        let mut expected_lower = 0;
        for i in 0..BUCKETS {
            let (lower, upper) = bounds(i);
            assert_eq!(lower, expected_lower, "bucket {i}");
            assert!(upper > lower);
            if lower >= 4 {
                assert!((upper - lower) * 4 <= lower, "bucket {i}: {lower}..{upper}");
            }
            assert_eq!(bucket_of(lower), i);
            assert_eq!(bucket_of(upper - 1), i);
            expected_lower = upper;
        }
        // The last bucket takes everything slower.
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bounds(BUCKETS - 1).0, 7 << 23);
    }

    #[test]
    fn p99_comes_from_the_interval_alone() {
        let faces = Faces::default();
        // An old slow request, before the first reading.
        faces.observe(Face::V1, Duration::from_secs(2));
        let before = faces.read();
        // 99 requests of 100 µs and one of 50 ms.
        for _ in 0..99 {
            faces.observe(Face::V1, Duration::from_micros(100));
        }
        faces.observe(Face::V1, Duration::from_millis(50));
        let after = faces.read();
        let (count, p99) = p99_between(&before[0], &after[0]);
        assert_eq!(count, 100);
        // Rank 99 of 100 is a 100 µs request: inside its bucket, 96..112 µs.
        let p99 = p99.unwrap();
        assert!((0.096..=0.112).contains(&p99), "{p99}");
        // Nothing on the other faces; one more fast request moves the rank.
        assert_eq!(p99_between(&before[1], &after[1]), (0, None));
        faces.observe(Face::V1, Duration::from_millis(50));
        let (count, p99) = p99_between(&before[0], &faces.read()[0]);
        assert_eq!(count, 101);
        let p99 = p99.unwrap();
        assert!((49.0..=57.4).contains(&p99), "{p99}");
    }

    #[test]
    fn a_timer_counts_on_drop() {
        let faces = Faces::default();
        drop(faces.timer(Face::Grpc));
        let read = faces.read();
        assert_eq!(read[Face::Grpc.index()].iter().sum::<u64>(), 1);
        assert_eq!(read[Face::Api.index()].iter().sum::<u64>(), 0);
    }

    #[test]
    fn routes_map_to_their_face() {
        assert_eq!(Face::of_route("/nacos/v1/ns/instance"), Some(Face::V1));
        assert_eq!(Face::of_route("/nacos/v2/ns/instance"), Some(Face::V2));
        assert_eq!(Face::of_route("/api/v1/overview"), Some(Face::Api));
        assert_eq!(Face::of_route("/nacos/v3/admin/ns/service"), Some(Face::V3));
        assert_eq!(Face::of_route("/eureka/apps/{app}"), Some(Face::Eureka));
        assert_eq!(
            Face::of_route("/v1/health/service/{service}"),
            Some(Face::Consul)
        );
        assert_eq!(Face::of_route("/nacos/prometheus"), None);
        for other in ["/metrics", "/health/ready", "unmatched", "/nacos/eureka"] {
            assert_eq!(Face::of_route(other), None, "{other}");
        }
    }
}
