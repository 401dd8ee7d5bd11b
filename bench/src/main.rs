//! roster-bench: runs roster and r-nacos side by side on this machine, with the same
//! data and the same load, alternating between them over rounds, and reports both
//! figures (medians of the rounds), their ratio and the target (`bench/run` builds
//! everything and calls this).
//!
//! Modules: `procs` (every child process, killed on exit, panic or signal), `servers`
//! (single nodes and three-node clusters of both systems), `api` (the Nacos v1 calls and
//! bulk registration), `wrk` (the load generator and its report), `machine` (CPU,
//! kernel, versions, RSS), `report` (rows, targets, markdown and JSON), and one module
//! per metric group: `list` (with the bare-axum ceiling), `writes` (registrations and
//! beats), `memory`, `cluster`, `push`, `configs` (config reads and long-poll
//! notifications), `fanout` (gRPC push fan-out to 10,000 subscribers and memory per
//! connection).

mod api;
mod catchup;
mod cluster;
mod configs;
mod faces;
mod fanout;
mod grpc;
mod list;
mod machine;
mod memory;
mod procs;
mod push;
mod report;
mod servers;
mod shapes;
mod writes;
mod wrk;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};

use crate::machine::Machine;
use crate::report::Report;
use crate::servers::{Setup, System};
use crate::shapes::Shape;
use crate::wrk::{Figures, Load};

/// Benchmark roster against r-nacos on this machine.
#[derive(Debug, Parser)]
#[command(name = "roster-bench")]
struct Args {
    /// Metric groups to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<Group>,
    /// Shorter runs and less data, to try the bench out; figures are not comparable
    /// with a full run.
    #[arg(long)]
    quick: bool,
    /// Rounds of the list, register, beat, rss groups and config reads (default 3, 1 with
    /// --quick):
    /// the systems alternate within them, and each figure is the median over them.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=9))]
    rounds: Option<u64>,
    /// The roster binary (default: target/release/roster).
    #[arg(long)]
    roster_bin: Option<PathBuf>,
    /// The r-nacos binary (default: target/bench/rnacos/bin/rnacos).
    #[arg(long)]
    rnacos_bin: Option<PathBuf>,
    /// Instance shapes the rss group measures, comma-separated (default: all): none,
    /// spring-cloud, dubbo, grpc.
    #[arg(long, value_delimiter = ',')]
    shapes: Vec<Shape>,
    /// gRPC connections the catchup group opens, each owning 200 instances (default
    /// 5,000: a million instances; 500 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=9_000))]
    catchup_connections: Option<u32>,
}

/// A group of metrics that run together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Group {
    /// Instance-list QPS and latency (10 and 100 instances) and the bare-axum ceiling.
    List,
    /// Ephemeral registrations per second, distinct instances.
    Register,
    /// Heartbeats per second over 10,000 instances.
    Beat,
    /// Resident memory idle and at 100,000 instances of each shape (none, spring-cloud,
    /// dubbo, grpc), and per instance.
    Rss,
    /// Three-node clusters: persistent registrations through a follower; ephemeral
    /// registrations of the dubbo shape through one node, and memory per instance on
    /// every node.
    Cluster,
    /// UDP push latency to 100 subscribers (roster only).
    Push,
    /// Config reads per second, and change → long-poll notification latency with
    /// 10,000 items listened to over 1,000 connections.
    Config,
    /// gRPC push fan-out: 10,000 subscribers of one service, change → push latency, and
    /// memory per gRPC connection.
    Fanout,
    /// A node killed and restarted at a million instances (roster only).
    Catchup,
    /// roster's Consul, Eureka and Prometheus SD faces against its own Nacos v1 list and
    /// beats, on the same data (roster only).
    Faces,
}

impl Group {
    const ALL: [Group; 10] = [
        Group::List,
        Group::Register,
        Group::Beat,
        Group::Rss,
        Group::Cluster,
        Group::Push,
        Group::Config,
        Group::Fanout,
        Group::Catchup,
        Group::Faces,
    ];

    fn name(self) -> &'static str {
        match self {
            Group::List => "list",
            Group::Register => "register",
            Group::Beat => "beat",
            Group::Rss => "rss",
            Group::Cluster => "cluster",
            Group::Push => "push",
            Group::Config => "config",
            Group::Fanout => "fanout",
            Group::Catchup => "catchup",
            Group::Faces => "faces",
        }
    }

    /// Whether the group starts r-nacos (push, catchup and faces measure roster alone).
    fn needs_rnacos(self) -> bool {
        !matches!(self, Group::Push | Group::Catchup | Group::Faces)
    }
}

/// Durations and sizes of a run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Rounds of the alternating groups.
    pub rounds: usize,
    /// Measured wrk runs, seconds.
    pub secs: u64,
    /// wrk warm-up before list and beat runs, seconds.
    pub warm_up_secs: u64,
    /// Instances registered before the beat run.
    pub beat_instances: usize,
    /// Instance counts at which RSS is measured: the first for the `none` shape only,
    /// on the way to the second, which every shape registers.
    pub rss_counts: [usize; 2],
    /// Push rounds.
    pub push_rounds: usize,
    /// UDP subscribers.
    pub push_subscribers: usize,
    /// Config changes whose long-poll notification is timed, per system.
    pub config_rounds: usize,
    /// gRPC subscribers of the fan-out group (one connection each).
    pub fanout_subscribers: usize,
    /// Fan-out push rounds, per system.
    pub fanout_rounds: usize,
    /// gRPC connections of the catch-up group, each owning 200 ephemeral instances.
    pub catchup_connections: usize,
    /// Persistent instances of the catch-up group.
    pub catchup_persistent: usize,
    /// How long a cluster may take to hold every acknowledged write after the run.
    pub converge: Duration,
}

impl Plan {
    fn new(quick: bool, rounds: Option<u64>) -> Self {
        let mut plan = Self::defaults(quick);
        if let Some(rounds) = rounds {
            plan.rounds = rounds as usize;
        }
        plan
    }

    fn defaults(quick: bool) -> Self {
        if quick {
            Self {
                rounds: 1,
                secs: 3,
                warm_up_secs: 1,
                beat_instances: 10_000,
                rss_counts: [10_000, 30_000],
                push_rounds: 5,
                push_subscribers: 100,
                config_rounds: 10,
                fanout_subscribers: 1_000,
                fanout_rounds: 5,
                catchup_connections: 500,
                catchup_persistent: 2_000,
                converge: Duration::from_secs(20),
            }
        } else {
            Self {
                rounds: 3,
                secs: 10,
                warm_up_secs: 2,
                beat_instances: 10_000,
                rss_counts: [10_000, 100_000],
                push_rounds: 20,
                push_subscribers: 100,
                config_rounds: 100,
                fanout_subscribers: 10_000,
                fanout_rounds: 10,
                catchup_connections: 5_000,
                catchup_persistent: 10_000,
                converge: Duration::from_secs(60),
            }
        }
    }
}

/// What every metric needs: the binaries, the plan, where scripts and reports are.
pub struct Bench {
    /// Binaries and scratch directory.
    pub setup: Setup,
    /// Durations and sizes.
    pub plan: Plan,
    /// `bench/lua`.
    pub lua: PathBuf,
    /// Where wrk's raw reports go.
    pub wrk_dir: PathBuf,
    /// Instance shapes the rss group measures.
    pub shapes: Vec<Shape>,
}

impl Bench {
    /// The order of the systems in `round`: roster first in even rounds, r-nacos first
    /// in odd ones (ABBA), so that a machine drifting one way over the group favours
    /// neither.
    pub fn order(&self, round: usize) -> [System; 2] {
        let [a, b] = System::BOTH;
        if round.is_multiple_of(2) {
            [a, b]
        } else {
            [b, a]
        }
    }

    /// The rounds of the alternating groups.
    pub fn rounds(&self) -> std::ops::Range<usize> {
        0..self.plan.rounds
    }

    /// Every run of an alternating group that starts fresh servers: (round, system), in
    /// the order they run.
    pub fn runs(&self) -> impl Iterator<Item = (usize, System)> + '_ {
        self.rounds()
            .flat_map(|round| self.order(round).map(|system| (round, system)))
    }

    /// The Lua script `name` in `bench/lua`.
    pub fn script(&self, name: &str) -> PathBuf {
        self.lua.join(name)
    }

    /// Runs wrk; its report is kept as `<name>.txt`.
    pub async fn wrk(&self, name: &str, load: Load) -> Result<Figures> {
        let figures = wrk::run(&load, &self.wrk_dir.join(format!("{name}.txt"))).await?;
        eprintln!(
            "  {name}: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms{}",
            figures.ok_per_sec(),
            figures.p50_ms,
            figures.p99_ms,
            match figures.failures() {
                f if f.is_empty() => String::new(),
                f => format!(" ({f})"),
            }
        );
        Ok(figures)
    }

    /// A warm-up run of `load` for the plan's warm-up time (not reported).
    pub async fn warm_up(&self, name: &str, load: Load) -> Result<()> {
        let load = Load {
            secs: self.plan.warm_up_secs,
            ..load
        };
        wrk::run(&load, &self.wrk_dir.join(format!("{name}-warm-up.txt"))).await?;
        Ok(())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    // A panic anywhere (a bug) still takes the servers down with it.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        procs::kill_all();
        default_hook(info);
    }));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("roster-bench: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        tokio::select! {
            r = run(args) => r,
            signal = stopped() => bail!("stopped by {signal}"),
        }
    });
    // The run future (and every Node in it) is dropped by now; this catches the rest.
    procs::kill_all();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roster-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT or SIGTERM, naming it.
async fn stopped() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

async fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("bench/ has a parent")?
        .to_path_buf();
    let out = workspace.join("target/bench");
    let scratch = out.join("tmp");
    let _ = std::fs::remove_dir_all(&scratch);
    procs::init(&scratch.join("pids"))?;
    let wrk_dir = scratch.join("wrk");
    std::fs::create_dir_all(&wrk_dir)?;
    let groups: Vec<Group> = if args.only.is_empty() {
        Group::ALL.to_vec()
    } else {
        Group::ALL
            .into_iter()
            .filter(|g| args.only.contains(g))
            .collect()
    };
    // `bench/run` builds roster where cargo does: `$CARGO_TARGET_DIR` when set (relative
    // to the workspace), else `target/`.
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map_or_else(|| workspace.join("target"), |dir| workspace.join(dir));
    let setup = Setup {
        roster: args
            .roster_bin
            .unwrap_or_else(|| target_dir.join("release/roster")),
        rnacos: args
            .rnacos_bin
            .unwrap_or_else(|| out.join("rnacos/bin/rnacos")),
        scratch: scratch.clone(),
    };
    let needs_rnacos = groups.iter().any(|g| g.needs_rnacos());
    for bin in [&setup.roster, &setup.rnacos] {
        if (needs_rnacos || bin == &setup.roster) && !bin.is_file() {
            bail!("{} is missing (bench/run builds it)", bin.display());
        }
    }
    let plan_defaults = Plan::new(args.quick, args.rounds);
    let machine = Machine::describe(&workspace, &setup.roster, &setup.rnacos);
    eprintln!(
        "machine: {}, {} cores, Linux {}; roster {}, {}",
        machine.cpu, machine.cores, machine.kernel, machine.roster_commit, machine.rnacos_version
    );
    let bench = Bench {
        setup,
        plan: Plan {
            catchup_connections: args
                .catchup_connections
                .map_or(plan_defaults.catchup_connections, |c| c as usize),
            ..plan_defaults
        },
        lua: workspace.join("bench/lua"),
        wrk_dir,
        shapes: if args.shapes.is_empty() {
            Shape::ALL.to_vec()
        } else {
            Shape::ALL
                .into_iter()
                .filter(|s| args.shapes.contains(s))
                .collect()
        },
    };
    let mut report = Report::default();
    // 1,000 gRPC connections (rss), 1,000 long polls (config) and 10,000 gRPC
    // subscribers (fanout) need descriptors in the driver and in the servers, which
    // inherit the limit.
    match raise_descriptor_limit() {
        Ok(limit) => report.check(format!(
            "descriptor limit {limit} (the driver's soft limit, raised to the hard one; the \
             servers inherit it)"
        )),
        Err(e) => report.check(format!("descriptor limit not raised: {e:#}")),
    }
    for group in &groups {
        let t = Instant::now();
        eprintln!("[{}]", group.name());
        // Nothing of ours runs now: what keeps the CPU busy is someone else's work.
        if let Some(busy) = machine::busy_share(Duration::from_secs(1)).await {
            report.check(format!(
                "CPU busy before {}: {:.0}% (other processes; 0% is a quiet machine)",
                group.name(),
                busy * 100.0
            ));
        }
        let outcome = match group {
            Group::List => list::run(&bench, &mut report).await,
            Group::Register => writes::register(&bench, &mut report).await,
            Group::Beat => writes::beat(&bench, &mut report).await,
            Group::Rss => memory::run(&bench, &mut report).await,
            Group::Cluster => cluster::run(&bench, &mut report).await,
            Group::Push => push::run(&bench, &mut report).await,
            Group::Config => configs::run(&bench, &mut report).await,
            Group::Fanout => fanout::run(&bench, &mut report).await,
            Group::Catchup => catchup::run(&bench, &mut report).await,
            Group::Faces => faces::run(&bench, &mut report).await,
        };
        // One group failing does not lose the others' figures.
        if let Err(e) = outcome {
            report.check(format!("{} FAILED: {e:#}", group.name()));
        }
        eprintln!("[{}] {:.0} s", group.name(), t.elapsed().as_secs_f64());
    }

    let context = report::Context {
        machine: &machine,
        quick: args.quick,
        groups: groups.iter().map(|g| g.name()).collect(),
        elapsed_secs: started.elapsed().as_secs_f64(),
        notes: notes(&bench),
    };
    let markdown = report::markdown(&report, &context);
    let json = serde_json::to_string_pretty(&report::json(&report, &context))?;
    std::fs::write(out.join("results.md"), &markdown)?;
    std::fs::write(out.join("results.json"), json + "\n")?;
    println!("{markdown}");
    eprintln!(
        "wrote {} and {}",
        out.join("results.md").display(),
        out.join("results.json").display()
    );
    Ok(())
}

/// Raises this process's soft descriptor limit to its hard limit; returns the limit in
/// force.
fn raise_descriptor_limit() -> Result<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        )
        .context("setrlimit")?;
    }
    Ok(getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX))
}

/// How the figures were made, printed under the table.
fn notes(bench: &Bench) -> Vec<String> {
    let plan = &bench.plan;
    vec![
        "Authentication: r-nacos with its open-API auth off (its default, \
         `RNACOS_ENABLE_OPEN_API_AUTH=false`); roster with `--no-auth`, except in the list \
         group, where roster runs as it ships, authentication on, and every list request and \
         gRPC query carries the admin's token (`accessToken`, as a logged-in Nacos client \
         sends it) — the handicap is roster's."
            .to_string(),
        format!(
            "Loopback only, logs at warn. list, register, beat and rss run in {} round{}; the \
             systems alternate within each round (roster first in odd-numbered rounds, r-nacos \
             first in even-numbered ones) and every figure in the table is the median over the \
             rounds (each round's rate is in the notes). register, beat and rss start fresh \
             servers for every run; list loads one server of each system and alternates wrk \
             runs between them; cluster (a fresh three-node cluster for the persistent run and \
             another for the ephemeral dubbo-shaped one) and push run once, roster first. \
             Load: wrk -t{} -c{} \
             --latency, {} s measured ({} s warm-up before list and beat runs); bulk loading \
             by the driver (32 requests in flight).",
            plan.rounds,
            if plan.rounds == 1 { "" } else { "s" },
            wrk::THREADS,
            wrk::CONNECTIONS,
            plan.secs,
            plan.warm_up_secs
        ),
        "The load generator shares the 2 cores with the server(s) (and, for the cluster, \
         three servers share them): every figure is a lower bound of what the server alone \
         could do, and the ratios compare the systems under the same handicap."
            .to_string(),
        "Rates count 2xx answers only; p50/p99 are wrk's latency percentiles.".to_string(),
        "r-nacos has no UDP push (its 1.x UDP listener is commented out in 0.8.x): push rows \
         are roster only."
            .to_string(),
        format!(
            "rss: a fresh node per system, shape and round; instances of each shape ({}) \
             registered to {} (ephemeral; `none` also read at {}): `none`, `spring-cloud` and \
             `dubbo` through `POST /nacos/v1/ns/instance` with the metadata a Nacos 1.x client \
             sends (none; Spring Cloud Alibaba's 3 keys; a Dubbo 3 provider's 9 keys, a \
             revision per service and a timestamp per instance), 32 in flight, 1,000 services \
             of 100; `grpc` over Nacos 2.x gRPC connections with the Spring Cloud metadata, \
             one connection (from its own 127/8 address) per 100 instances, each holding one \
             instance in each of 100 services, 50 registering at a time, all open until the \
             readings are taken. RSS is read right after the last registration is \
             acknowledged; memory per instance is (that RSS − the same node's idle RSS) / \
             instances held (counted through the HTTP list right after).",
            bench
                .shapes
                .iter()
                .map(|s| s.key())
                .collect::<Vec<_>>()
                .join(", "),
            report::thousands(plan.rss_counts[1] as u64),
            report::thousands(plan.rss_counts[0] as u64),
        ),
        "Persistent list instances point at TCP listeners the driver keeps open, so both \
         systems' TCP health checks pass and the lists stay complete."
            .to_string(),
        format!(
            "config: one server of each system holds a 1 KiB properties item and 10,000 more \
             items published beforehand; reads (`GET /nacos/v1/cs/configs`, the same wrk load) \
             alternate between them in the rounds as list does. Notifications run once per \
             system, roster first: 1,000 connections, one HTTP client each (like 1,000 client \
             applications), listen to 10 distinct items each through the v1 HTTP long poll \
             (`POST /nacos/v1/cs/configs/listener`, `Long-Pulling-Timeout: 30000`), polling \
             again right after every answer and reading a changed item first, as Nacos 1.x \
             clients do; once all 1,000 polls are in flight on established connections, {} \
             rounds each publish a new content for one item (the same distinct items, in the \
             same order, for both systems) and time from the publish's `true` to the answer \
             of the poll naming it (a miss after 5 s). The HTTP long poll is what both \
             systems and Nacos 1.x clients speak; Nacos 2.x clients get gRPC pushes instead, \
             which roster's tests cover and this bench does not time.",
            plan.config_rounds
        ),
        format!(
            "fanout: a fresh single node per system, roster first; {} Nacos 2.x gRPC \
             connections, each from its own 127/8 address, open 200 at a time, then, once all \
             are open, subscribe to one service (`SubscribeServiceRequest`) 200 at a time; \
             every one answers every server request on its stream; memory per connection is (RSS with all of them open and subscribed \
             − the same node's idle RSS) / connections open. Then {} rounds each register a \
             new ephemeral instance through `POST /nacos/v1/ns/instance` and time, per \
             subscriber, the first `NotifySubscriberRequest` listing it, from just before the \
             registration is sent (a miss after 10 s), then deregister it and wait for the \
             removal pushes. Measured at {} connections per node, not the issue's 20,000: \
             the hard descriptor limit (20,000 here) binds the driver, which holds the other \
             end of every connection, and each server alike, and roster's `--grpc-max-connections` defaults to 10,000. \
             Then the cost curve, roster only: one more fresh node takes a tenth, a quarter, \
             half and all of the subscribers step by step, and at each step its RSS, its CPU \
             over 5 s with nothing changing, and its CPU over 3 rounds (per change: a \
             registration or a removal and its pushes) are read; the knee is the first step \
             whose CPU per change and subscriber is 1.5x the first step's, or whose p99 \
             reaches 1 s.",
            report::thousands(plan.fanout_subscribers as u64),
            plan.fanout_rounds,
            report::thousands(plan.fanout_subscribers as u64),
        ),
    ]
}
