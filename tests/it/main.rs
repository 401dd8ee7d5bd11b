//! roster's black-box tests: one binary, real `roster` processes, real clients.

mod abuse;
mod addresses;
mod audit;
mod auth;
mod authz;
mod clients;
mod cluster;
mod console;
mod distro;
mod durability;
mod grpc;
mod health_check;
mod heartbeat;
mod layering;
mod limits;
mod nacos_v1;
mod nacos_v2;
mod observer;
mod ops;
mod push;
mod selection;
mod sync;
mod sync_fakes;
mod sync_sources;
mod tls;
