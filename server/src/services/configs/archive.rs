//! Nacos' configuration export format, written and read: a zip of `group/dataId`
//! entries holding each item's content, with `.metadata.yml` (Nacos 2.x, `exportV2`)
//! listing each item's `dataId`, `group`, `type`, `appName` and `desc`. Reading also
//! takes Nacos 1.x's `.meta.yml` (`group.dataId~with~tildes.app=appName` lines) and
//! archives without metadata (the type then comes from the dataId's extension).
//!
//! Reading is bounded, for archives from anyone: at most [`MAX_ENTRIES`] entries, each
//! item's content at most the configured limit, everything read at most
//! [`MAX_TOTAL_BYTES`] — a zip bomb stops there.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};

use zip::write::SimpleFileOptions;

use super::{ConfigItem, ConfigKey};

/// Most entries an archive may hold.
pub const MAX_ENTRIES: usize = 10_000;
/// Most bytes read out of an archive in all.
pub const MAX_TOTAL_BYTES: u64 = 256 * 1024 * 1024;
/// The metadata entry of Nacos 2.x archives.
const METADATA_V2: &str = ".metadata.yml";
/// The metadata entry of Nacos 1.x archives.
const METADATA_V1: &str = ".meta.yml";

/// An item read from an archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchivedItem {
    /// Group.
    pub group: String,
    /// Data id.
    pub data_id: String,
    /// Content.
    pub content: String,
    /// Content type (from the metadata, else the dataId's extension, else `text`).
    pub r#type: String,
    /// Application.
    pub app_name: String,
    /// Description.
    pub desc: String,
}

/// Why an archive could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArchiveError {
    /// Not a zip, or a damaged one.
    #[error("not a readable zip archive: {0}")]
    Unreadable(String),
    /// Over a bound.
    #[error("{0}")]
    TooLarge(String),
    /// An entry that is neither `group/dataId` nor metadata, or content that is not
    /// UTF-8.
    #[error("{0}")]
    Malformed(String),
}

/// The archive of `items`, in Nacos 2.x's export format.
pub fn write(items: &[(ConfigKey, ConfigItem)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut metadata = String::from("metadata:\n");
    for (key, item) in items {
        let name = format!("{}/{}", key.group, key.data_id);
        // Writing into memory cannot fail but for a duplicate name, which keys exclude.
        if zip.start_file(name, options).is_ok() {
            let _ = zip.write_all(item.content.as_bytes());
        }
        metadata.push_str(&format!("- dataId: {}\n", quote(&key.data_id)));
        metadata.push_str(&format!("  group: {}\n", quote(&key.group)));
        metadata.push_str(&format!("  type: {}\n", quote(&item.r#type)));
        metadata.push_str(&format!("  appName: {}\n", quote(&item.app_name)));
        metadata.push_str(&format!("  desc: {}\n", quote(&item.desc)));
    }
    if zip.start_file(METADATA_V2, options).is_ok() {
        let _ = zip.write_all(metadata.as_bytes());
    }
    zip.finish().map(Cursor::into_inner).unwrap_or_default()
}

/// A YAML scalar for `value`: single-quoted, quotes doubled.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// A YAML scalar as written: `'single'` (quotes doubled), `"double"` (common escapes)
/// or plain.
fn unquote(raw: &str) -> String {
    let raw = raw.trim();
    if raw.len() >= 2 && raw.starts_with('\'') && raw.ends_with('\'') {
        return raw[1..raw.len() - 1].replace("''", "'");
    }
    if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
        return raw[1..raw.len() - 1]
            .replace("\\\"", "\"")
            .replace("\\n", "\n")
            .replace("\\\\", "\\");
    }
    raw.to_string()
}

/// Metadata by (group, dataId): type, appName, desc.
type Metadata = BTreeMap<(String, String), BTreeMap<String, String>>;

/// `.metadata.yml`: a `metadata:` list of maps.
fn parse_metadata_v2(text: &str) -> Metadata {
    let mut rows: Vec<BTreeMap<String, String>> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let (starts_row, body) = match trimmed.strip_prefix("- ") {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let Some((key, value)) = body.split_once(':') else {
            continue;
        };
        if !starts_row && line.len() == trimmed.len() {
            // A top-level key (`metadata:`).
            continue;
        }
        if starts_row || rows.is_empty() {
            rows.push(BTreeMap::new());
        }
        if let Some(row) = rows.last_mut() {
            row.insert(key.trim().to_string(), unquote(value));
        }
    }
    rows.into_iter()
        .filter_map(|mut row| {
            let group = row.remove("group")?;
            let data_id = row.remove("dataId")?;
            Some(((group, data_id), row))
        })
        .collect()
}

/// `.meta.yml` of Nacos 1.x: `group.dataId.app=appName`, the dataId's dots as `~`.
fn parse_metadata_v1(text: &str) -> Metadata {
    let mut out = Metadata::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=').or_else(|| line.split_once(": ")) else {
            continue;
        };
        let Some(stem) = key.trim().strip_suffix(".app") else {
            continue;
        };
        let Some((group, data_id)) = stem.split_once('.') else {
            continue;
        };
        out.entry((group.to_string(), data_id.replace('~', ".")))
            .or_default()
            .insert("appName".into(), unquote(value));
    }
    out
}

/// The type a dataId's extension says (`app.yaml` → `yaml`), else `text`.
fn type_of(data_id: &str) -> String {
    let known = [
        "yaml",
        "yml",
        "properties",
        "json",
        "xml",
        "html",
        "htm",
        "toml",
        "text",
        "txt",
    ];
    match data_id
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
    {
        Some(ext) if known.contains(&ext.as_str()) => match ext.as_str() {
            "yml" => "yaml".into(),
            "htm" => "html".into(),
            "txt" => "text".into(),
            _ => ext,
        },
        _ => "text".into(),
    }
}

/// Reads the items of an archive; each content at most `max_content` bytes.
pub fn read(bytes: &[u8], max_content: usize) -> Result<Vec<ArchivedItem>, ArchiveError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| ArchiveError::Unreadable(e.to_string()))?;
    if zip.len() > MAX_ENTRIES {
        return Err(ArchiveError::TooLarge(format!(
            "the archive has {} entries; at most {MAX_ENTRIES} are read",
            zip.len()
        )));
    }
    let mut budget = MAX_TOTAL_BYTES;
    let mut contents: Vec<(String, String, String)> = Vec::new();
    let mut metadata = Metadata::new();
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| ArchiveError::Unreadable(e.to_string()))?;
        if entry.is_dir() {
            continue;
        }
        let name = entry.name().to_string();
        let is_metadata = name == METADATA_V2 || name == METADATA_V1;
        let limit = if is_metadata {
            budget
        } else {
            (max_content as u64).min(budget)
        };
        let mut text = String::new();
        let read = (&mut entry)
            .take(limit + 1)
            .read_to_string(&mut text)
            .map_err(|e| {
                ArchiveError::Malformed(format!("{name}: {e} (contents must be UTF-8)"))
            })?;
        if read as u64 > limit {
            return Err(ArchiveError::TooLarge(format!(
                "{name}: more than {limit} bytes (--config-max-content-bytes, or the archive's \
                 {MAX_TOTAL_BYTES}-byte total)"
            )));
        }
        budget -= read as u64;
        match name.as_str() {
            METADATA_V2 => metadata.extend(parse_metadata_v2(&text)),
            METADATA_V1 => {
                for (k, v) in parse_metadata_v1(&text) {
                    metadata.entry(k).or_default().extend(v);
                }
            }
            _ => {
                let Some((group, data_id)) = name.split_once('/') else {
                    return Err(ArchiveError::Malformed(format!(
                        "entry '{name}' is not group/dataId"
                    )));
                };
                contents.push((group.to_string(), data_id.to_string(), text));
            }
        }
    }
    Ok(contents
        .into_iter()
        .map(|(group, data_id, content)| {
            let meta = metadata.get(&(group.clone(), data_id.clone()));
            let field = |k: &str| meta.and_then(|m| m.get(k)).cloned().unwrap_or_default();
            let r#type = Some(field("type"))
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| type_of(&data_id));
            ArchivedItem {
                app_name: field("appName"),
                desc: field("desc"),
                r#type,
                group,
                data_id,
                content,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn item(content: &str, r#type: &str, app: &str) -> ConfigItem {
        ConfigItem {
            id: 1,
            content: Arc::from(content),
            md5: String::new(),
            r#type: r#type.into(),
            app_name: app.into(),
            desc: "it's a test".into(),
            tags: String::new(),
            created_ms: 0,
            modified_ms: 0,
            created_by: String::new(),
            modified_by: String::new(),
            src_ip: String::new(),
            owner: None,
        }
    }

    #[test]
    fn an_export_reads_back_as_it_was() {
        let items = vec![
            (
                ConfigKey::new("", "DEFAULT_GROUP", "app.yaml"),
                item("a: 1\n", "yaml", "shop"),
            ),
            (
                ConfigKey::new("", "mapping", "org.demo.Api"),
                item("shop,cart", "text", ""),
            ),
        ];
        let read = read(&write(&items), 1024).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(
            read[0],
            ArchivedItem {
                group: "DEFAULT_GROUP".into(),
                data_id: "app.yaml".into(),
                content: "a: 1\n".into(),
                r#type: "yaml".into(),
                app_name: "shop".into(),
                desc: "it's a test".into(),
            }
        );
        assert_eq!(
            (read[1].group.as_str(), read[1].content.as_str()),
            ("mapping", "shop,cart")
        );
    }

    /// A zip of `entries` (name, content), as another tool would write it.
    fn zip_of(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, content) in entries {
            zip.start_file(*name, SimpleFileOptions::default()).unwrap();
            zip.write_all(content.as_bytes()).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn nacos_1_metadata_and_none_at_all_are_read() {
        let v1 = zip_of(&[
            ("DEFAULT_GROUP/app.properties", "k=v"),
            ("G/notes", "hello"),
            (".meta.yml", "DEFAULT_GROUP.app~properties.app=billing\n"),
        ]);
        let read = read(&v1, 1024).unwrap();
        assert_eq!(
            (read[0].r#type.as_str(), read[0].app_name.as_str()),
            ("properties", "billing")
        );
        assert_eq!(
            (read[1].r#type.as_str(), read[1].app_name.as_str()),
            ("text", "")
        );
    }

    #[test]
    fn hostile_archives_are_refused() {
        assert!(matches!(
            read(b"not a zip", 10),
            Err(ArchiveError::Unreadable(_))
        ));
        let big = "x".repeat(11);
        assert!(matches!(
            read(&zip_of(&[("G/a", &big)]), 10),
            Err(ArchiveError::TooLarge(_))
        ));
        assert!(matches!(
            read(&zip_of(&[("flat", "x")]), 10),
            Err(ArchiveError::Malformed(_))
        ));
        let latin1 = {
            let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
            zip.start_file("G/a", SimpleFileOptions::default()).unwrap();
            zip.write_all(&[0xff, 0xfe]).unwrap();
            zip.finish().unwrap().into_inner()
        };
        assert!(matches!(read(&latin1, 10), Err(ArchiveError::Malformed(_))));
    }

    #[test]
    fn yaml_scalars_unquote() {
        assert_eq!(unquote("'it''s'"), "it's");
        assert_eq!(unquote("\"a\\\"b\""), "a\"b");
        assert_eq!(unquote(" plain "), "plain");
        let meta = parse_metadata_v2(
            "metadata:\n- dataId: a.yaml\n  group: G\n  type: yaml\n- group: 'H'\n  dataId: b\n",
        );
        assert_eq!(meta[&("G".into(), "a.yaml".into())]["type"], "yaml");
        assert!(meta.contains_key(&("H".into(), "b".into())));
    }
}
