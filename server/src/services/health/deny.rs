//! Where health checks never go. Anyone who may register a persistent instance picks
//! the address the Raft leader connects to, so without a limit the checker is a way to
//! reach what only the registry's hosts can: the cloud metadata service
//! (169.254.169.254), link-local neighbours, and the node's own listeners (its peer
//! port, where Raft and Distro live). `--health-check-deny` names networks the checker
//! leaves alone (default: the link-local ranges); this node's own listening sockets are
//! always denied, by address and port, so a test's loopback instance is still checked.
//! A denied target is not probed at all and its health is left as it is.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

/// The default of `--health-check-deny`: IPv4 and IPv6 link-local.
pub const DEFAULT_DENY: &str = "169.254.0.0/16,fe80::/10";

/// An IP network, `address/prefix` (a bare address is one host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    /// The network address, host bits cleared.
    addr: IpAddr,
    /// Prefix length: up to 32 for IPv4, 128 for IPv6.
    len: u8,
}

impl Cidr {
    /// Whether `ip` is in the network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                mask(u32::from(ip).into(), self.len, 32) == u128::from(u32::from(net))
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                mask(u128::from(ip), self.len, 128) == u128::from(net)
            }
            _ => false,
        }
    }
}

/// `bits` (an address of `width` bits) with all but the first `len` bits cleared.
fn mask(bits: u128, len: u8, width: u8) -> u128 {
    if len == 0 {
        return 0;
    }
    let host_bits = u32::from(width - len);
    (bits >> host_bits) << host_bits
}

/// Why a network did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a network (ADDRESS/PREFIX, e.g. 169.254.0.0/16 or fe80::/10)")]
pub struct CidrError(String);

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Self, CidrError> {
        let bad = || CidrError(text.to_string());
        let (addr, len) = match text.split_once('/') {
            Some((addr, len)) => (addr, Some(len)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => width,
            Some(len) if len.bytes().all(|b| b.is_ascii_digit()) && !len.is_empty() => len
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= width)
                .ok_or_else(bad)?,
            Some(_) => return Err(bad()),
        };
        // Host bits are cleared, so `10.1.2.3/8` is `10.0.0.0/8`.
        let addr = match addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(mask(u32::from(a).into(), len, 32) as u32)),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(mask(u128::from(a), len, 128))),
        };
        Ok(Cidr { addr, len })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The networks of `--health-check-deny`: a comma-separated list, empty for none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DenyNets(pub Vec<Cidr>);

impl FromStr for DenyNets {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Self, CidrError> {
        text.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map(DenyNets)
    }
}

impl fmt::Display for DenyNets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, net) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{net}")?;
        }
        Ok(())
    }
}

/// Every target the checker must leave alone: the configured networks, and this node's
/// own listening sockets.
#[derive(Clone, Debug, Default)]
pub struct DenyList {
    nets: Vec<Cidr>,
    /// The node's own listeners, as bound (a wildcard bind stands for every local
    /// address).
    own: Vec<SocketAddr>,
}

impl DenyList {
    /// The networks of `--health-check-deny` and the node's listening sockets.
    pub fn new(nets: &DenyNets, own: impl IntoIterator<Item = SocketAddr>) -> Self {
        Self {
            nets: nets.0.clone(),
            own: own.into_iter().collect(),
        }
    }

    /// Whether `target` may not be connected to.
    pub fn denies(&self, target: SocketAddr) -> bool {
        let ip = target.ip().to_canonical();
        self.nets.iter().any(|n| n.contains(ip))
            || self
                .own
                .iter()
                .any(|own| own.port() == target.port() && reaches(ip, own.ip().to_canonical()))
    }
}

/// Whether a connection to `ip` lands on a socket bound to `bound` (same port): the
/// same address; the unspecified address, which the kernel sends to loopback; or, for a
/// wildcard bind, any address of this host.
fn reaches(ip: IpAddr, bound: IpAddr) -> bool {
    let loopback_of = |ip: IpAddr| match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    };
    let ip = if ip.is_unspecified() {
        loopback_of(ip)
    } else {
        ip
    };
    if ip == bound {
        return true;
    }
    // A wildcard bind (of either family: `[::]` takes IPv4 too) hears every local
    // address; binding a socket to one is the portable test of "local".
    bound.is_unspecified() && (ip.is_loopback() || std::net::UdpSocket::bind((ip, 0)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_and_contain() {
        let nets: DenyNets = DEFAULT_DENY.parse().unwrap();
        assert_eq!(nets.to_string(), "169.254.0.0/16,fe80::/10");
        let contains = |ip: &str| nets.0.iter().any(|n| n.contains(ip.parse().unwrap()));
        assert!(contains("169.254.169.254"));
        assert!(contains("::ffff:169.254.1.1"));
        assert!(contains("fe80::1"));
        assert!(contains("febf::1"));
        assert!(!contains("fec0::1"));
        assert!(!contains("169.255.0.1"));
        assert!(!contains("127.0.0.1"));
        assert_eq!(
            "10.1.2.3/8".parse::<Cidr>().unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            "127.0.0.2".parse::<Cidr>().unwrap().to_string(),
            "127.0.0.2/32"
        );
        assert!("0.0.0.0/0"
            .parse::<Cidr>()
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert_eq!("".parse::<DenyNets>().unwrap(), DenyNets::default());
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "x",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn own_sockets_are_denied_by_address_and_port() {
        let deny = DenyList::new(
            &DenyNets::default(),
            [addr("127.0.0.1:8848"), addr("0.0.0.0:7848")],
        );
        assert!(deny.denies(addr("127.0.0.1:8848")));
        assert!(deny.denies(addr("0.0.0.0:8848")), "0.0.0.0 is loopback");
        assert!(deny.denies(addr("[::ffff:127.0.0.1]:8848")));
        assert!(
            !deny.denies(addr("127.0.0.2:8848")),
            "another loopback address"
        );
        assert!(!deny.denies(addr("127.0.0.1:8849")), "another port");
        // The wildcard bind hears every local address on its port.
        assert!(deny.denies(addr("127.0.0.9:7848")));
        assert!(deny.denies(addr("[::1]:7848")));
        assert!(
            !deny.denies(addr("192.0.2.1:7848")),
            "TEST-NET-1 is not local"
        );
    }
}
