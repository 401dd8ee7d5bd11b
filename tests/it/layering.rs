//! The server crate keeps its layers (docs/architecture.md, "Forbidden imports"), read
//! from its own sources: nothing below the protocol faces imports `api/`, `grpc/` or the
//! sync runner `imports`; `grpc/` imports nothing from `api/`; no import circle spans
//! more than five files; no source file is longer than 900 lines.
//!
//! Imports are read outside comments and outside `mod tests` blocks: every path of a
//! `use` tree, its `{..}` groups expanded (`a::{b, c::{d, self}}` is `a::b`, `a::c::d`
//! and `a::c`), and every `crate::`, `super::` or `self::` path elsewhere in the code. A
//! path names the longest module it starts with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use roster_tests::workspace_root;

/// Modules (as `a::b`) and their source text, comments removed.
fn modules() -> BTreeMap<String, String> {
    let root = workspace_root().join("server/src");
    let mut out = BTreeMap::new();
    collect(&root, &root, &mut out);
    assert!(out.len() > 40, "found only {} modules", out.len());
    out
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir)
        .expect("server/src is readable")
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

/// The code of a source file: comments and `mod tests { .. }` blocks left out.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `name` imports.
fn imports(name: &str, text: &str, all: &BTreeMap<String, String>) -> BTreeSet<String> {
    let code = code(text);
    let mut paths = use_paths(&code);
    paths.extend(inline_paths(&code));
    paths
        .iter()
        .filter_map(|path| absolute(name, path))
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

/// The `crate::`, `super::` and `self::` paths in `code`, each from its first segment.
fn inline_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for prefix in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            let path: String = rest[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            rest = &rest[at + prefix.len()..];
            // `x::super::` is the middle of a path, `my_crate::` another word; a path
            // that ends in `::{` or `::*` is a use tree's, read by `use_paths`.
            let word = before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            if !word && !path.ends_with(':') {
                found.push(path);
            }
        }
    }
    found
}

/// The path `path`, written in module `name`, from the crate root (`a::b`), or `None` for
/// a path that does not start with `crate`, `super` or `self` (another crate's, or a
/// child module named bare: a parent's own `mod` items are not counted as imports).
/// `super::` names the module's parent, whether the module is a `mod.rs` or a leaf file
/// (`a/b/mod.rs` and `a/b.rs` are both `a::b`, whose parent is `a`).
fn absolute(name: &str, path: &str) -> Option<String> {
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
        return None;
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

fn under(module: &str, prefix: &str) -> bool {
    module == prefix || module.starts_with(&format!("{prefix}::"))
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
            for w in &self.graph[v] {
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

#[test]
fn the_server_crate_keeps_its_layers() {
    let all = modules();
    let graph: BTreeMap<String, BTreeSet<String>> = all
        .iter()
        .map(|(name, text)| (name.clone(), imports(name, text, &all)))
        .collect();
    let mut broken = Vec::new();
    // The faces and the wiring may import the faces; nothing else may.
    let faces = ["api", "grpc", "imports"];
    for (module, targets) in &graph {
        let exempt = faces.iter().any(|f| under(module, f)) || module == "app";
        if exempt {
            continue;
        }
        for target in targets.iter().filter(|t| faces.iter().any(|f| under(t, f))) {
            broken.push(format!("{module} imports {target}"));
        }
    }
    for (module, targets) in graph.iter().filter(|(m, _)| under(m, "grpc")) {
        for target in targets.iter().filter(|t| under(t, "api")) {
            broken.push(format!("{module} (gRPC) imports {target} (HTTP)"));
        }
    }
    for circle in circles(&graph).iter().filter(|c| c.len() > 5) {
        broken.push(format!(
            "an import circle of {} files: {circle:?}",
            circle.len()
        ));
    }
    for (module, text) in &all {
        let lines = text.lines().count();
        if lines > 900 {
            broken.push(format!("{module} has {lines} lines (at most 900)"));
        }
    }
    assert!(
        broken.is_empty(),
        "server/src breaks its layering (docs/architecture.md):\n{}",
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
fn the_layering_check_sees_imports_and_circles() {
    let mut all = BTreeMap::new();
    for (name, text) in [
        ("crate", "pub mod a; pub mod b; pub mod c;"),
        // `c` is imported only inside a group.
        ("a", "use crate::{b::Thing, c}; // crate::d is a comment"),
        ("a::inner", "use super::x;"),
        ("b", "use crate::a::inner::F;"),
        ("c", "use super::{a::{self, inner::{self as i}}, b as bee};"),
    ] {
        all.insert(name.to_string(), text.to_string());
    }
    let seen = |m: &str| imports(m, &all[m], &all);
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(seen("a"), set(&["b", "c"]));
    assert_eq!(seen("b"), set(&["a::inner"]));
    assert_eq!(seen("a::inner"), set(&["a"]));
    assert_eq!(seen("c"), set(&["a", "a::inner", "b"]));
    let graph: BTreeMap<String, BTreeSet<String>> =
        all.keys().map(|m| (m.clone(), seen(m))).collect();
    let found = circles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].len(),
        4,
        "a → c → a, a → b → a::inner → a: {found:?}"
    );
}
