//! Network namespaces for partition tests: each node runs in its own namespace with two
//! links — a cluster link to a shared bridge (peer traffic) and a client link to the
//! test process (HTTP). Cutting a node's cluster link partitions it from its peers while
//! the test can still talk to it; cutting the path between two nodes (a blackhole route
//! each way) leaves each of them their other peers, for partitions of any shape. Needs
//! root and `ip` (iproute2); everything is torn down on drop.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A set of namespaces, one per node.
pub struct NetLab {
    tag: String,
    subnet: u32,
    nodes: usize,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (install iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetLab {
    /// Creates namespaces and links for `nodes` nodes. Fails (never skips) when the
    /// machine does not allow it.
    pub fn create(nodes: usize) -> Result<Self, String> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let lab = Self {
            tag: format!("{:x}{seq}", pid % 0xfff),
            subnet: (pid + seq) % 200 + 20,
            nodes,
        };
        lab.build().inspect_err(|_| lab.teardown())?;
        Ok(lab)
    }

    fn bridge(&self) -> String {
        format!("rb{}", self.tag)
    }

    fn ns(&self, i: usize) -> String {
        format!("rn{}{i}", self.tag)
    }

    fn build(&self) -> Result<(), String> {
        let s = self.subnet;
        let br = self.bridge();
        ip(&["link", "add", &br, "type", "bridge"])?;
        ip(&["addr", "add", &format!("10.231.{s}.254/24"), "dev", &br])?;
        ip(&["link", "set", &br, "up"])?;
        for i in 1..=self.nodes {
            let ns = self.ns(i);
            let exec = |args: &[&str]| {
                let mut all = vec!["netns", "exec", ns.as_str(), "ip"];
                all.extend_from_slice(args);
                ip(&all)
            };
            ip(&["netns", "add", &ns])?;
            exec(&["link", "set", "lo", "up"])?;
            // Cluster link: node <-> bridge.
            let (host_c, ns_c) = (format!("rc{}{i}", self.tag), format!("rk{}{i}", self.tag));
            ip(&[
                "link", "add", &host_c, "type", "veth", "peer", "name", &ns_c,
            ])?;
            ip(&["link", "set", &ns_c, "netns", &ns])?;
            ip(&["link", "set", &host_c, "master", &br])?;
            ip(&["link", "set", &host_c, "up"])?;
            exec(&["addr", "add", &format!("10.231.{s}.{i}/24"), "dev", &ns_c])?;
            exec(&["link", "set", &ns_c, "up"])?;
            // Client link: node <-> test process, point to point.
            let (host_u, ns_u) = (format!("ru{}{i}", self.tag), format!("rw{}{i}", self.tag));
            ip(&[
                "link", "add", &host_u, "type", "veth", "peer", "name", &ns_u,
            ])?;
            ip(&["link", "set", &ns_u, "netns", &ns])?;
            ip(&[
                "addr",
                "add",
                &format!("10.232.{s}.{}/30", 4 * i + 1),
                "dev",
                &host_u,
            ])?;
            ip(&["link", "set", &host_u, "up"])?;
            exec(&[
                "addr",
                "add",
                &format!("10.232.{s}.{}/30", 4 * i + 2),
                "dev",
                &ns_u,
            ])?;
            exec(&["link", "set", &ns_u, "up"])?;
        }
        Ok(())
    }

    /// The command node `i` (from 1) runs under.
    pub fn wrapper(&self, i: usize) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.ns(i)]
    }

    /// The IP node `i` serves HTTP on (reachable from the test process).
    pub fn http_host(&self, i: usize) -> String {
        format!("10.232.{}.{}", self.subnet, 4 * i + 2)
    }

    /// The IP node `i` talks to its peers on.
    pub fn peer_host(&self, i: usize) -> String {
        format!("10.231.{}.{i}", self.subnet)
    }

    /// Cuts node `i` off from its peers (its client link stays up).
    pub fn cut(&self, i: usize) {
        ip(&["link", "set", &format!("rc{}{i}", self.tag), "down"]).expect("cut");
    }

    /// Reconnects node `i` to its peers.
    pub fn heal(&self, i: usize) {
        ip(&["link", "set", &format!("rc{}{i}", self.tag), "up"]).expect("heal");
    }

    /// Cuts the path between nodes `i` and `j` (from 1), both ways: each drops what it
    /// sends the other (a blackhole route in its namespace). Connections between them
    /// stall; new ones fail at once. Their other paths, and the client links, stay.
    pub fn cut_between(&self, i: usize, j: usize) {
        self.route_between("add", i, j).expect("cut between");
    }

    /// Restores the path between nodes `i` and `j` (nothing happens if it was not cut).
    pub fn heal_between(&self, i: usize, j: usize) {
        let _ = self.route_between("del", i, j);
    }

    fn route_between(&self, verb: &str, i: usize, j: usize) -> Result<(), String> {
        for (from, to) in [(i, j), (j, i)] {
            let dest = format!("{}/32", self.peer_host(to));
            let result = ip(&["-n", &self.ns(from), "route", verb, "blackhole", &dest]);
            // Adding a cut that is there, or healing one that is not, is no error.
            if let Err(e) = result {
                if !e.contains("File exists") && !e.contains("No such process") {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Restores every path between nodes and every cluster link.
    pub fn heal_everything(&self) {
        for i in 1..=self.nodes {
            self.heal(i);
            for j in i + 1..=self.nodes {
                self.heal_between(i, j);
            }
        }
    }

    fn teardown(&self) {
        for i in 1..=self.nodes {
            // Deleting one end of a veth deletes both; a namespace can outlive its name
            // (sockets in TIME_WAIT), so the links go explicitly.
            let _ = ip(&["link", "del", &format!("rc{}{i}", self.tag)]);
            let _ = ip(&["link", "del", &format!("ru{}{i}", self.tag)]);
            let _ = ip(&["netns", "del", &self.ns(i)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        self.teardown();
    }
}
