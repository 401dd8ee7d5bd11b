//! The server crate keeps its layers (docs/architecture.md, "Forbidden imports"), read
//! from its own sources: nothing below the protocol faces imports `api/`, `grpc/` or the
//! sync runner `imports`; `grpc/` imports nothing from `api/`; no import circle spans
//! more than five files; no source file is longer than 900 lines.
//!
//! Imports are read as `crate::<path>` and `super::<path>` mentions outside comments and
//! outside `mod tests` blocks; a path names the longest module it starts with.

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
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").collect();
        (1..=parts.len())
            .rev()
            .map(|n| parts[..n].join("::"))
            .find(|candidate| all.contains_key(candidate))
    };
    let parent = |m: &str| {
        m.rsplit_once("::")
            .map_or("crate".to_string(), |(p, _)| p.to_string())
    };
    // `super::` names the module's parent, whether the module is a `mod.rs` or a leaf
    // file (`a/b/mod.rs` and `a/b.rs` are both `a::b`, whose parent is `a`).
    let base = parent(name);
    let code = code(text);
    let mut found = BTreeSet::new();
    for (prefix, root) in [("crate::", String::new()), ("super::", base)] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let full = match root.as_str() {
                "" | "crate" => path.trim_end_matches(':').to_string(),
                r => format!("{r}::{}", path.trim_end_matches(':')),
            };
            if let Some(target) = resolve(&full).filter(|t| t != name) {
                found.insert(target);
            }
        }
    }
    found
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
        let exempt = faces.iter().any(|f| under(module, f))
            || module == "app"
            // The model test reads the list cache as readers fill it (test code only).
            || under(module, "registry::model");
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
fn the_layering_check_sees_imports_and_circles() {
    let mut all = BTreeMap::new();
    for (name, text) in [
        ("crate", "pub mod a; pub mod b;"),
        ("a", "use crate::b::Thing; // crate::c is a comment"),
        ("a::inner", "use super::x;"),
        ("b", "use crate::a::inner::F;"),
    ] {
        all.insert(name.to_string(), text.to_string());
    }
    let seen = |m: &str| imports(m, &all[m], &all);
    assert_eq!(seen("a"), BTreeSet::from(["b".to_string()]));
    assert_eq!(seen("b"), BTreeSet::from(["a::inner".to_string()]));
    assert_eq!(seen("a::inner"), BTreeSet::from(["a".to_string()]));
    let graph: BTreeMap<String, BTreeSet<String>> =
        all.keys().map(|m| (m.clone(), seen(m))).collect();
    let found = circles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3, "a → b → a::inner → a: {found:?}");
}
