//! The workspace keeps its layers (docs/architecture.md, "Layers").
//!
//! Where a crate boundary holds a layer, Cargo enforces it; this test checks what Cargo
//! cannot: that the registry core (`registry/`) depends on no other roster crate, does
//! no I/O, and reads the clock only in `clock.rs`.
//!
//! Inside the server crate it reads the full import graph from the sources. A module
//! imports what its `use` trees name (groups expanded: `a::{b, c::{d, self}}` is `a::b`,
//! `a::c::d` and `a::c`), every `crate::`, `super::` or `self::` path elsewhere in its
//! code, every path that starts with the name of one of its child modules, and the child
//! modules it declares; comments and `mod tests` blocks are left out. A path names the
//! longest module it starts with. The graph is then read by unit: a top-level module,
//! or each module directly under `services/` and `faces/`. The rules:
//!
//! - the layers point one way: services (with `error`) → `state` → faces → the node's
//!   wiring (`node`, `cli`); a unit imports only its own layer and the layers before it;
//! - a face does not import another face (each stands on the services and the state);
//! - no circle between units is longer than 3;
//! - no source file of the server or the registry has over 700 lines of production
//!   code (its lines before a `#[cfg(test)] mod tests` block; test-only files aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use roster_tests::workspace_root;

/// The longest circle of units allowed.
const MAX_CIRCLE: usize = 3;
/// The most production lines a source file may have.
const MAX_LINES: usize = 700;

/// Modules (as `a::b`) of the crate whose sources are in `dir`, and their source text.
fn modules(dir: &str) -> BTreeMap<String, String> {
    let root = workspace_root().join(dir);
    let mut out = BTreeMap::new();
    collect(&root, &root, &mut out);
    assert!(out.len() > 20, "found only {} modules in {dir}", out.len());
    out
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir)
        .expect("the sources are readable")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(root).unwrap().with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        let name = match parts.join("::").as_str() {
            "lib" => "crate".to_string(),
            other => other.to_string(),
        };
        let text = std::fs::read_to_string(&path).unwrap();
        out.insert(name, text);
    }
}

/// A source file's production code: its text before a `#[cfg(test)] mod tests` block.
fn production(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The code of a source file: comments and `mod tests { .. }` blocks left out.
fn code(text: &str) -> String {
    production(text)
        .lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether module `name` is only built for tests: a `tests` module or one beneath it.
fn test_only(name: &str) -> bool {
    name.split("::")
        .any(|part| part == "tests" || part == "model")
}

/// The modules `name` imports.
fn imports(name: &str, text: &str, all: &BTreeMap<String, String>) -> BTreeSet<String> {
    let code = code(text);
    let mut paths = use_paths(&code);
    paths.extend(inline_paths(&code));
    paths.extend(child_paths(name, &code, all));
    paths.extend(declared(&code).into_iter().map(|m| format!("self::{m}")));
    paths
        .iter()
        .filter_map(|path| absolute(name, path, all))
        .filter_map(|path| resolve(&path, all))
        .filter(|target| target != name)
        .collect()
}

/// Every path the `use` declarations in `code` name, groups expanded.
fn use_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "use ".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        let tree = &rest[..end];
        // Only a use tree: path segments, `::`, groups, globs and `as` renames (this
        // leaves out "use " in string literals).
        let is_tree = tree
            .chars()
            .all(|c| c.is_alphanumeric() || c.is_whitespace() || "_:{},*".contains(c));
        if is_tree {
            found.extend(expand(tree));
        }
    }
    found
}

/// The paths of one use tree: `a::{b, c::{d, e as f}, self}` is `a::b`, `a::c::d`,
/// `a::c::e` and `a`; a glob `a::*` is `a`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        // `a::b as c` names `a::b`.
        let path = tree.split_whitespace().next().unwrap_or("");
        return vec![path.trim_end_matches("::*").to_string()];
    };
    let prefix = &tree[..open];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, open + 1);
    for (i, c) in tree.char_indices().skip_while(|(i, _)| *i <= open) {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&tree[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for item in items.into_iter().map(str::trim).filter(|i| !i.is_empty()) {
        if item == "self" || item.starts_with("self ") {
            out.push(prefix.trim_end_matches("::").to_string());
        } else {
            out.extend(expand(item).into_iter().map(|p| format!("{prefix}{p}")));
        }
    }
    out
}

/// The paths in `code` that start with `prefix` at a word's start, each whole.
fn paths_from(code: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        let path: String = rest[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        rest = &rest[at + prefix.len()..];
        // `x::super::` is the middle of a path, `my_crate::` another word; a path that
        // ends in `::{` or `::*` is a use tree's, read by `use_paths`.
        let word = before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        if !word && !path.ends_with(':') {
            found.push(path);
        }
    }
    found
}

/// The `crate::`, `super::` and `self::` paths in `code`, each from its first segment.
fn inline_paths(code: &str) -> Vec<String> {
    ["crate::", "super::", "self::"]
        .into_iter()
        .flat_map(|prefix| paths_from(code, prefix))
        .collect()
}

/// The paths in module `name`'s `code` that start with one of its children's names
/// (`child::item`), as `self::child::item`.
fn child_paths(name: &str, code: &str, all: &BTreeMap<String, String>) -> Vec<String> {
    let prefix = match name {
        "crate" => String::new(),
        _ => format!("{name}::"),
    };
    all.keys()
        .filter_map(|m| m.strip_prefix(&prefix))
        .filter(|child| !child.is_empty() && !child.contains("::"))
        .flat_map(|child| paths_from(code, &format!("{child}::")))
        .map(|path| format!("self::{path}"))
        .collect()
}

/// The child modules `code` declares (`mod a;`, `pub mod b;`, `pub(crate) mod c;`).
fn declared(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub ")
                .or_else(|| line.strip_prefix("pub(crate) "))
                .or_else(|| line.strip_prefix("pub(super) "))
                .unwrap_or(line);
            let module = rest.strip_prefix("mod ")?.strip_suffix(';')?.trim();
            module
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_')
                .then(|| module.to_string())
        })
        .collect()
}

/// The path `path`, written in module `name`, from the crate root (`a::b`), or `None` for
/// a path that does not start with `crate`, `super` or `self` (another crate's).
/// `super::` names the module's parent, whether the module is a `mod.rs` or a leaf file
/// (`a/b/mod.rs` and `a/b.rs` are both `a::b`, whose parent is `a`).
fn absolute(name: &str, path: &str, all: &BTreeMap<String, String>) -> Option<String> {
    let mut parts: Vec<&str> = path
        .split("::")
        .filter(|p| !p.is_empty() && *p != "*")
        .collect();
    let mut base: Vec<&str> = match name {
        "crate" => Vec::new(),
        _ => name.split("::").collect(),
    };
    let first = *parts.first()?;
    if first == "crate" {
        base.clear();
        parts.remove(0);
    } else if first == "self" || first == "super" {
        while let Some(&("self" | "super")) = parts.first() {
            if parts.remove(0) == "super" {
                base.pop();
            }
        }
    } else {
        // A use tree's bare path names a child module (`use child::Item;`), else
        // another crate.
        let child = base.iter().chain([&first]).copied().collect::<Vec<_>>();
        if !all.contains_key(&child.join("::")) {
            return None;
        }
    }
    Some(base.into_iter().chain(parts).collect::<Vec<_>>().join("::"))
}

/// The longest module `path` (from the crate root) starts with.
fn resolve(path: &str, all: &BTreeMap<String, String>) -> Option<String> {
    if path.is_empty() {
        return Some("crate".to_string());
    }
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|candidate| all.contains_key(candidate))
}

/// The unit module `module` belongs to: its top-level module, or the module directly
/// under `services` or `faces`; `None` for the crate root, the binary, and the two
/// grouping modules themselves.
fn unit(module: &str) -> Option<String> {
    let parts: Vec<&str> = module.split("::").collect();
    match parts.as_slice() {
        ["crate" | "main" | "services" | "faces"] => None,
        [group @ ("services" | "faces"), name, ..] => Some(format!("{group}::{name}")),
        [top, ..] => Some(top.to_string()),
        [] => None,
    }
}

/// The layer of a unit, from the core outwards.
fn layer(unit: &str) -> u8 {
    match unit.split("::").next().unwrap_or("") {
        "services" | "error" => 1,
        "state" => 2,
        "faces" => 3,
        _ => 4,
    }
}

/// The import graph of `all` between units.
fn unit_graph(all: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut units: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in all {
        let Some(from) = unit(module) else { continue };
        let targets = imports(module, text, all);
        let entry = units.entry(from.clone()).or_default();
        entry.extend(
            targets
                .iter()
                .filter_map(|t| unit(t))
                .filter(|t| *t != from),
        );
    }
    units
}

/// Strongly connected components of the import graph (Tarjan), largest first.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found.sort_by_key(|c| std::cmp::Reverse(c.len()));
    walk.found
}

/// Files of `all` (in `dir`) with more than [`MAX_LINES`] production lines.
fn long_files(dir: &str, all: &BTreeMap<String, String>) -> Vec<String> {
    all.iter()
        .filter(|(module, _)| !test_only(module))
        .filter_map(|(module, text)| {
            let lines = production(text).lines().count();
            (lines > MAX_LINES).then(|| format!("{dir} {module}: {lines} production lines"))
        })
        .collect()
}

#[test]
fn the_server_crate_keeps_its_layers() {
    let all = modules("server/src");
    let graph = unit_graph(&all);
    let mut broken = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            if layer(to) > layer(from) {
                broken.push(format!("{from} imports {to}, a layer above it"));
            }
            let faces = from.starts_with("faces::") && to.starts_with("faces::");
            if faces {
                broken.push(format!("{from} imports {to}: a face imports another face"));
            }
        }
    }
    for circle in circles(&graph).iter().filter(|c| c.len() > MAX_CIRCLE) {
        broken.push(format!(
            "an import circle of {} units: {circle:?}",
            circle.len()
        ));
    }
    broken.extend(long_files("server/src", &all));
    assert!(
        broken.is_empty(),
        "server/src breaks its layering (docs/architecture.md):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_registry_core_stands_alone() {
    let manifest = std::fs::read_to_string(workspace_root().join("registry/Cargo.toml")).unwrap();
    let mut broken: Vec<String> = manifest
        .lines()
        .filter(|line| line.trim_start().starts_with("roster-"))
        .map(|line| format!("registry/Cargo.toml depends on {line}"))
        .collect();
    let all = modules("registry/src");
    for (module, text) in all.iter().filter(|(m, _)| !test_only(m)) {
        let code = code(text);
        for io in [
            "std::fs",
            "std::io",
            "TcpStream",
            "UdpSocket",
            "std::process",
        ] {
            if code.contains(io) {
                broken.push(format!("registry {module} does I/O ({io})"));
            }
        }
        let tokio = paths_from(&code, "tokio::");
        if let Some(other) = tokio.iter().find(|p| *p != "tokio::sync::Notify") {
            broken.push(format!("registry {module} uses {other} (only Notify)"));
        }
        let reads_clock = code.contains("SystemTime::now") || code.contains("Instant::now");
        if reads_clock && module != "clock" {
            broken.push(format!(
                "registry {module} reads the clock (only clock.rs does)"
            ));
        }
    }
    broken.extend(long_files("registry/src", &all));
    assert!(
        broken.is_empty(),
        "the registry core breaks its rules (docs/architecture.md):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_layering_check_expands_use_groups() {
    assert_eq!(
        expand("a::{b, c::{d, e as f, self}, self}"),
        ["a::b", "a::c::d", "a::c::e", "a::c", "a"]
    );
    assert_eq!(expand("super::*"), ["super"]);
    assert_eq!(
        expand("crate::{x::{\n    y,\n    z::*,\n}}"),
        ["crate::x::y", "crate::x::z"]
    );
    let code = "pub(crate) use super::{a, b::{self as bee, C}};\nfn reuse() {}\nuse self::d;";
    assert_eq!(
        use_paths(code),
        ["super::a", "super::b", "super::b::C", "self::d"]
    );
}

#[test]
fn the_layering_check_sees_imports_children_and_circles() {
    let mut all = BTreeMap::new();
    for (name, text) in [
        ("crate", "pub mod a; pub mod b; pub mod c; pub mod d;"),
        // `c` is imported only inside a group; `inner` is declared, `leaf` named bare.
        (
            "a",
            "mod inner;\nmod leaf;\nuse crate::{b::Thing, c}; // crate::d is a comment\nfn f() { leaf::go() }",
        ),
        ("a::inner", "use super::x;"),
        ("a::leaf", "pub fn go() {}"),
        ("b", "use crate::a::inner::F;"),
        ("c", "use super::{a::{self, inner::{self as i}}, b as bee};"),
        ("d", "use other_crate::leaf::x; fn g() { c::h() }"),
    ] {
        all.insert(name.to_string(), text.to_string());
    }
    let seen = |m: &str| imports(m, &all[m], &all);
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(seen("a"), set(&["a::inner", "a::leaf", "b", "c"]));
    assert_eq!(seen("b"), set(&["a::inner"]));
    assert_eq!(seen("a::inner"), set(&["a"]));
    assert_eq!(seen("c"), set(&["a", "a::inner", "b"]));
    // Another crate's path and a sibling named bare are not this crate's imports.
    assert_eq!(seen("d"), set(&[]));
    let units = unit_graph(&all);
    assert_eq!(units["a"], set(&["b", "c"]));
    let found = circles(&units);
    assert_eq!(found, [["a", "b", "c"]], "a → b → a, a → c → a");
}

#[test]
fn units_are_top_level_modules_or_those_under_services_and_faces() {
    assert_eq!(
        unit("services::store::machine").as_deref(),
        Some("services::store")
    );
    assert_eq!(
        unit("faces::http::nacos::instance").as_deref(),
        Some("faces::http")
    );
    assert_eq!(unit("node::args::run").as_deref(), Some("node"));
    assert_eq!(unit("state").as_deref(), Some("state"));
    assert_eq!(unit("services"), None);
    assert_eq!(unit("crate"), None);
    assert!(layer("services::store") < layer("state"));
    assert!(layer("state") < layer("faces::grpc"));
    assert!(layer("faces::grpc") < layer("node"));
    assert_eq!(layer("error"), layer("services::distro"));
}
