//! The peer channel, what nodes speak to each other over: its sealed message format
//! ([`wire`]), the sending side ([`client`]: `PeerClient`, also Raft's transport),
//! replay refusal ([`replay`]) and mutual TLS ([`tls`]). It knows nothing of what the
//! messages mean: the store, Distro and the members send through it, and its receiving
//! side is a face (`faces::peer`), which routes each message to the part it is for.

pub mod client;
pub mod replay;
pub mod tls;
pub mod wire;
