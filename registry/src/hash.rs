//! Stable hashing for decisions every node must make alike: which node owns a client
//! (Distro's rendezvous hashing) and which instance a key picks (consistent-hash
//! balancing). Unlike `std`'s hasher, these give the same value on every build and
//! platform, so the values are part of the contract between nodes and versions.

/// FNV-1a, 64 bits: stable across builds and platforms (unlike `std`'s hasher).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A 64-bit finalizer (splitmix64), so that scores of nearby ids are unrelated.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fixed() {
        // Known value: the hash is part of the wire contract between versions.
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
