//! Telling subscribers about changes: Nacos v1 UDP push ([`udp`]).

pub mod udp;
