//! The README's table of the clients the tests run names the versions the tests build:
//! each row's version is read from the file that pins it (a `go.mod`, a requirements file,
//! `package.json`, `tests/Cargo.toml`, a Java module's `pom.xml`), and every Go library
//! and every Java client line the tests build has a row, so the table cannot drift from
//! what runs.

use roster_tests::workspace_root;

/// The rows of the README's "Clients the tests run" table: (package, version).
fn table() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("### Clients the tests run")
        .expect("the README has a section \"Clients the tests run\"");
    let section = &readme[start..];
    let end = section[4..].find("\n#").map_or(section.len(), |e| e + 4);
    section[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let package = cells[1].split('`').nth(1).unwrap_or("").to_string();
            let version = cells[2].trim_matches('`').to_string();
            (package, version)
        })
        .collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap()
}

/// The versions the Java modules pin of `group:artifact`: each `<dependency>` (or imported
/// BOM) naming it, its `<version>` literal or a `${property}` of the same pom.
fn java_pinned(coordinate: &str) -> Vec<String> {
    let Some((group, artifact)) = coordinate.split_once(':') else {
        return Vec::new();
    };
    let dir = workspace_root().join("tests/clients/java");
    let Ok(modules) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut versions = Vec::new();
    for module in modules.flatten() {
        let Ok(pom) = std::fs::read_to_string(module.path().join("pom.xml")) else {
            continue;
        };
        let squeezed: String = pom.split_whitespace().collect();
        let head =
            format!("<groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>");
        for (at, _) in squeezed.match_indices(&head) {
            let rest = &squeezed[at + head.len()..];
            let Some(version) = rest.split("</version>").next() else {
                continue;
            };
            let version = match version.strip_prefix("${").and_then(|p| p.strip_suffix('}')) {
                Some(property) => squeezed
                    .split(&format!("<{property}>"))
                    .nth(1)
                    .and_then(|v| v.split(&format!("</{property}>")).next())
                    .unwrap_or(version)
                    .to_string(),
                None => version.to_string(),
            };
            versions.push(version);
        }
    }
    versions
}

/// The version the tests build of `package`, from the file that pins it.
fn pinned(package: &str) -> Option<String> {
    for go_mod in ["tests/clients/go/go.mod", "tests/clients/go-promsd/go.mod"] {
        if let Some(v) = read(go_mod).lines().find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(package))
                .then(|| words.next().map(str::to_string))
                .flatten()
        }) {
            return Some(v);
        }
    }
    for file in [
        "tests/clients/python/requirements.txt",
        "tests/clients/python3/requirements.txt",
    ] {
        // One file per SDK line: the same package is pinned in both, at different versions.
        let text = read(file);
        if let Some(v) = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{package}==")))
        {
            return Some(v.to_string());
        }
    }
    let node = read("tests/clients/node/package.json");
    if let Some(v) = node.lines().find_map(|l| {
        l.trim()
            .strip_prefix(&format!("\"{package}\": \""))
            .map(|rest| rest.trim_end_matches([',', '"']).to_string())
    }) {
        return Some(v);
    }
    let cargo = read("tests/Cargo.toml");
    cargo.lines().find_map(|l| {
        let rest = l.strip_prefix(&format!("{package} = "))?;
        let v = rest.split("version = \"").nth(1)?.split('"').next()?;
        Some(v.trim_start_matches('=').to_string())
    })
}

#[test]
fn the_readme_names_the_client_versions_the_tests_build() {
    let rows = table();
    assert!(rows.len() >= 9, "the table lists every client: {rows:?}");
    for (package, version) in &rows {
        // Two rows name nacos-sdk-python, one per line (0.1.x over HTTP, 3.x over gRPC).
        let ok = match package.as_str() {
            "nacos-sdk-python" => {
                read("tests/clients/python/requirements.txt")
                    .contains(&format!("nacos-sdk-python=={version}\n"))
                    || read("tests/clients/python3/requirements.txt")
                        .contains(&format!("nacos-sdk-python=={version}\n"))
            }
            // Maven coordinates: several modules may pin several lines of one artifact.
            p if p.contains(':') => java_pinned(p).contains(version),
            _ => pinned(package).as_deref() == Some(version.as_str()),
        };
        assert!(
            ok,
            "the README says {package} {version}; the tests build {:?} {:?}",
            pinned(package),
            java_pinned(package)
        );
    }
    // Every Java client line the Maven build pins has its row.
    for coordinate in [
        "com.alibaba.nacos:nacos-client",
        "com.alibaba.nacos:nacos-maintainer-client",
        "com.alibaba.cloud:spring-cloud-alibaba-dependencies",
        "org.springframework.cloud:spring-cloud-dependencies",
        "org.apache.dubbo:dubbo",
    ] {
        let pinned = java_pinned(coordinate);
        assert!(
            !pinned.is_empty(),
            "no module of tests/clients/java pins {coordinate}"
        );
        for version in pinned {
            assert!(
                rows.iter().any(|(p, v)| p == coordinate && *v == version),
                "the README's client table has no row for {coordinate} {version}"
            );
        }
    }
    // Every library the Go programs are built on has its row.
    for module in [
        "github.com/nacos-group/nacos-sdk-go/v2",
        "github.com/nacos-group/nacos-sdk-go",
        "dubbo.apache.org/dubbo-go/v3",
        "go-micro.dev/v4",
        "google.golang.org/grpc",
        "github.com/prometheus/prometheus",
    ] {
        assert!(
            pinned(module).is_some(),
            "{module} is not in tests/clients/go/go.mod nor tests/clients/go-promsd/go.mod"
        );
        assert!(
            rows.iter().any(|(p, _)| p == module),
            "the README's client table has no row for {module}"
        );
    }
}
