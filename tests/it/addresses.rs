//! Tests and the bench send nothing beyond this machine: every IPv4 literal in the sources
//! of `tests/` and `bench/` — the Rust tests, the client scripts, the Lua scripts, their
//! READMEs — is a loopback address or a netlab subnet's (`roster_tests::addresses`).
//! Templates count too: `format!("10.20.0.{i}")` and `"10.%d.%d.%d"` are addresses whose
//! first octets are written out.
//!
//! Invalid input is written as something that is not an address (`abc`, `999.1.1.1`) or
//! as a loopback one, because an address meant as bad input still goes out if the server
//! accepts it by mistake. The one exception is the guard's own tests ([`GUARD_FILES`]):
//! their off-machine literals are the input the guard must refuse, and they are never
//! sent anywhere.

use std::path::{Path, PathBuf};

use roster_tests::addresses::allowed;
use roster_tests::workspace_root;

/// Files whose off-machine literals exist to be refused: the guard and this scanner.
const GUARD_FILES: &[&str] = &["tests/src/addresses.rs", "tests/it/addresses.rs"];

/// Directories that hold installed packages or build output, not our sources.
const SKIPPED_DIRS: &[&str] = &["node_modules", "target", "__pycache__"];

/// Files worth reading: sources, scripts and their documentation.
const SCANNED_EXTENSIONS: &[&str] = &[
    "rs", "py", "js", "mjs", "ts", "lua", "sh", "go", "md", "toml", "json", "txt", "yaml", "yml",
];

#[test]
fn tests_and_bench_name_only_loopback_and_netlab_addresses() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in ["tests", "bench"] {
        collect(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 20,
        "the scan found only {} files under tests/ and bench/",
        files.len()
    );
    let mut offences = Vec::new();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let relative = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        if GUARD_FILES.contains(&relative.as_str()) {
            continue;
        }
        for (line_no, line) in text.lines().enumerate() {
            for literal in ipv4_literals(line) {
                seen += 1;
                if !literal.allowed() {
                    offences.push(format!("{relative}:{}: {}", line_no + 1, literal.text));
                }
            }
        }
    }
    // The scanner itself works: the sources are full of loopback literals.
    assert!(
        seen > 100,
        "only {seen} IPv4 literals found: the scan is broken"
    );
    assert!(
        offences.is_empty(),
        "addresses outside 127.0.0.0/8 and the netlab subnets in tests/ or bench/ \
         (use 127.x.y.z; see tests/src/addresses.rs):\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_scanner_finds_literals_and_templates() {
    let found = |line: &str| -> Vec<(String, bool)> {
        ipv4_literals(line)
            .into_iter()
            .map(|l| (l.text.clone(), l.allowed()))
            .collect()
    };
    assert_eq!(
        found("ip=10.0.0.1&port=80 and 127.0.0.1:8848"),
        [("10.0.0.1".into(), false), ("127.0.0.1".into(), true)]
    );
    assert_eq!(
        found(r#"format!("10.20.0.{i}")"#),
        [("10.20.0.{i}".into(), false)]
    );
    assert_eq!(
        found(r#"string.format("10.%d.%d.%d", a, b, c)"#),
        [("10.%d.%d.%d".into(), false)]
    );
    assert_eq!(
        found("`192.168.${n}.1`"),
        [("192.168.${n}.1".into(), false)]
    );
    assert_eq!(
        found(r#"format!("10.231.{s}.{i}/24")"#),
        [("10.231.{s}.{i}".into(), true)]
    );
    assert_eq!(
        found(r#"SetFilterNetNumberAndMask("0.0.0.0/0") or 0.0.0.1"#),
        [("0.0.0.0".into(), true), ("0.0.0.1".into(), false)]
    );
    // Versions, durations and bad input are not addresses.
    assert!(found("nacos-sdk 0.8.3, 1.25.0, 10.5s").is_empty());
    assert!(found("ip=999.1.1.1 and 1.2.3.4.5").is_empty());
    assert!(found("chromium 156.0.8078.73").is_empty());
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                collect(&path, out);
            }
        } else if name != "package-lock.json"
            && path
                .extension()
                .is_some_and(|e| SCANNED_EXTENSIONS.contains(&e.to_string_lossy().as_ref()))
        {
            out.push(path);
        }
    }
}

/// An IPv4 address written in a source, perhaps with placeholders for its last octets.
struct Literal {
    text: String,
    /// The octets written out, from the first (at least one).
    octets: Vec<u8>,
}

impl Literal {
    /// Allowed when the written octets already decide it: 127.x, or 10.231.x / 10.232.x;
    /// and `0.0.0.0`, the unspecified address (a listener's "any", a filter's "all"),
    /// which names no other machine.
    fn allowed(&self) -> bool {
        let mut full = [0u8; 4];
        full[..self.octets.len()].copy_from_slice(&self.octets);
        match self.octets.as_slice() {
            [127, ..] | [0, 0, 0, 0] => true,
            [10] => false,
            _ => allowed(full.into()),
        }
    }
}

/// The IPv4 literals on a line: four dot-separated parts, each an octet (0-255) or a
/// placeholder (`{..}`, `${..}`, `%d`), the first a written octet, none written after a
/// placeholder's successor is decided. A part run longer than four, or one next to a word
/// character, is not an address (`1.2.3.4.5`, `v1.2.3.4`).
fn ipv4_literals(line: &str) -> Vec<Literal> {
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_token = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'.'
                || bytes[i - 1] == b'_');
        if !(starts_token && bytes[i].is_ascii_digit()) {
            i += 1;
            continue;
        }
        match address_at(line, i) {
            Some((literal, end)) => {
                found.push(literal);
                i = end;
            }
            None => {
                // Skip the rest of this token.
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                    i += 1;
                }
            }
        }
    }
    found
}

/// The literal starting at `start`, and where it ends.
fn address_at(line: &str, start: usize) -> Option<(Literal, usize)> {
    let bytes = line.as_bytes();
    let mut octets = Vec::new();
    let mut placeholder = false;
    let mut i = start;
    for part in 0..4 {
        if part > 0 {
            if bytes.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
        let rest = &line[i..];
        let len = if rest.starts_with('{') || rest.starts_with("${") {
            rest.find('}')? + 1
        } else if rest.starts_with("%d") {
            2
        } else {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || digits > 3 {
                return None;
            }
            let value: u16 = rest[..digits].parse().ok()?;
            if value > 255 {
                return None;
            }
            if !placeholder {
                octets.push(value as u8);
            }
            digits
        };
        if len != 0 && !rest.as_bytes()[0].is_ascii_digit() {
            placeholder = true;
        }
        i += len;
    }
    // Not followed by more of the same token (`1.2.3.4.5`, `1.2.3.4abc`).
    let next = bytes.get(i).copied();
    let after = bytes.get(i + 1).copied();
    if next.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        || (next == Some(b'.') && after.is_some_and(|b| b.is_ascii_digit()))
    {
        return None;
    }
    Some((
        Literal {
            text: line[start..i].to_string(),
            octets,
        },
        i,
    ))
}
