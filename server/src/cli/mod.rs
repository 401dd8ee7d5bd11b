//! Client subcommands, one file each: `roster cluster status|add|remove`, `roster instance
//! list`, `roster sync add|list|status|pause|resume|apply|delete`, `roster auth
//! rotate-key` and `roster snapshot save` talk to a node's HTTP API (`api.rs`: how they reach it, with the given
//! credentials) and print text or JSON; `roster snapshot inspect|restore` and `roster
//! recover` work on files offline (`crate::services::backup`).

/// Writes a line to stdout, returning the error instead of panicking as `println!`
/// does: stdout may be a pipe its reader closed (`roster sync list | head -1`).
macro_rules! out {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*)?
    };
}

mod api;
mod auth;
mod cluster;
mod instance;
mod snapshot;
mod sync;

pub use auth::auth;
pub use cluster::cluster;
pub use instance::instance;
pub use snapshot::snapshot;
pub use sync::sync;

/// Whether `e` is a write to a closed pipe (the reader, e.g. `head`, has what it
/// wanted): the command ends quietly.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `key=value&...`, form-encoded.
fn query(pairs: &[(&str, String)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}
