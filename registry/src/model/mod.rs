//! The registry core against a naive model, on random operation sequences.
//!
//! The model is deliberately simple: plain ordered maps of services and instances, and
//! every read recomputed from them on demand — no published views, list caches, chunked
//! instance sequences, client indexes, sweep schedules or beat-clock sharing. The real
//! [`Registry`] and the model take the same operations (proptest generates them and, on
//! a failure, shrinks the sequence to a minimal one and prints it); after every step
//! every read the core offers must agree:
//!
//! - each service's existence, settings and instances, field by field, beat clocks too;
//! - [`select`] for the plain and healthy-only queries and two random ones per step
//!   (clusters, selectors, lanes, protection threshold), and the candidate sets of the
//!   three pick strategies;
//! - the cached plain list body a reader gets ([`plain_list_parts`]), parsed, and the
//!   gRPC `serviceInfo` copied from it, byte for byte as made from the instances;
//! - counts ([`Registry::totals`], healthy counts, cluster names, service lists, what a
//!   sync task owns);
//! - change notifications (every service whose visible state changed is marked for
//!   push) and service revisions (they grow with every visible change);
//! - Distro's view of clients: which records exist, their entries, the state a peer
//!   would be sent ([`Registry::client_data`]), and that every client changed here is
//!   handed to Distro with a higher revision.
//!
//! Operations: registrations, updates, deregistrations and beats of address clients
//! and gRPC-connection clients, ephemeral and persistent (with the API's kind check);
//! health checks' verdicts; service settings; time passing and expiry sweeps under an
//! eviction-guard policy chosen per sequence; ownership moving between nodes; Distro
//! copies arriving (newer, same, older), dropped and refreshed; connections closing or
//! trimming their set; sync imports and task removal; service deletion.
//!
//! One freedom is allowed the real registry: a removal the eviction guard held is judged
//! again only every [`HELD_RECHECK_MS`], so once the guard lets go, such an instance may
//! linger up to that long after the namespace's last hold; past it, it must be gone.
//!
//! `ROSTER_MODEL_CASES=N` sets the number of sequences (default [`DEFAULT_CASES`]), for
//! a long campaign: `ROSTER_MODEL_CASES=200000 cargo test -p roster-registry --lib model`.
//!
//! Files: [`ops`] the domain, operations and their strategies; [`naive`] the model;
//! [`compare`] the real side, applying each operation to both and comparing every read.
//!
//! [`select`]: crate::select::select
//! [`plain_list_parts`]: crate::wire::plain_list_parts
//! [`HELD_RECHECK_MS`]: crate::guard::HELD_RECHECK_MS

mod compare;
mod naive;
mod ops;

use std::collections::BTreeSet;
use std::sync::Mutex;

use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::guard::EvictionGuard;
use crate::Registry;
use compare::{apply, compare, Before, Real};
use naive::Model;
use ops::{step_strategy, Step, POLICIES, START_MS};

/// Sequences per run when `ROSTER_MODEL_CASES` is not set.
const DEFAULT_CASES: u32 = 3_000;
/// Longest sequence.
const MAX_STEPS: usize = 40;

/// Runs one sequence; the error names the step that disagreed.
fn run(policy: usize, steps: &[Step]) -> Result<(), TestCaseError> {
    let registry = Registry::new();
    let real = Real {
        changes: registry.watch(),
        registry,
        guard: EvictionGuard::new(POLICIES[policy]),
        foreign: Mutex::new(BTreeSet::new()),
    };
    let mut model = Model::new(POLICIES[policy]);
    let mut before = Before::default();
    for (n, step) in steps.iter().enumerate() {
        model.changed_here.clear();
        let outcome = apply(&real, &mut model, &step.op)
            .and_then(|()| compare(&real, &model, step, &mut before));
        if let Err(e) = outcome {
            return Err(TestCaseError::fail(format!(
                "step {n} ({:?}) at t+{} ms: {e}",
                step.op,
                model.now - START_MS
            )));
        }
    }
    Ok(())
}

#[test]
fn the_registry_agrees_with_a_naive_model() {
    let cases = std::env::var("ROSTER_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let config = Config {
        cases,
        // No regression files in the tree: a failure prints its shrunk sequence.
        failure_persistence: None,
        max_shrink_iters: 20_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (
        0..POLICIES.len(),
        proptest::collection::vec(step_strategy(), 1..=MAX_STEPS),
    );
    if let Err(e) = runner.run(&strategy, |(policy, steps)| run(policy, &steps)) {
        panic!("the registry and its model disagree: {e}");
    }
}
