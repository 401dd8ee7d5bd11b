//! Nacos' rules for configuration items, checked by every face before anything is
//! proposed: a refusal names the field (in the face's own spelling) and stores nothing.

use roster_registry::validate::{check_namespace_id, Invalid};

/// Longest dataId (Nacos' column holds 255).
pub const MAX_DATA_ID: usize = 255;
/// Longest group.
pub const MAX_GROUP: usize = 128;
/// Longest application name.
pub const MAX_APP_NAME: usize = 128;
/// Longest description (Nacos: 256).
pub const MAX_DESC: usize = 256;
/// At most this many tags (Nacos: 5), each at most [`MAX_TAG`] long.
pub const MAX_TAGS: usize = 5;
/// Longest tag (Nacos: 64).
pub const MAX_TAG: usize = 64;
/// Longest content type name.
pub const MAX_TYPE: usize = 32;

/// Nacos' character set for dataIds and groups: letters, digits and `_-.:`.
fn nacos_chars(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// Checks a dataId: 1 to 255 of letters, digits and `_-.:`.
pub fn check_data_id(field: &str, data_id: &str) -> Result<(), Invalid> {
    if data_id.is_empty() {
        return Err(Invalid::missing(field));
    }
    if data_id.len() > MAX_DATA_ID || !nacos_chars(data_id) {
        return Err(Invalid::illegal(
            field,
            "it should be 1 to 255 characters of letters, digits and '_-.:'.",
        ));
    }
    Ok(())
}

/// Checks a configuration group: 1 to 128 of letters, digits and `_-.:`.
pub fn check_config_group(field: &str, group: &str) -> Result<(), Invalid> {
    if group.is_empty() || group.len() > MAX_GROUP || !nacos_chars(group) {
        return Err(Invalid::illegal(
            field,
            "it should be 1 to 128 characters of letters, digits and '_-.:'.",
        ));
    }
    Ok(())
}

/// Most addresses one beta names.
pub const MAX_BETA_IPS: usize = 1000;

/// Checks a beta's addresses (`betaIps`): comma-separated IP addresses, 1 to
/// [`MAX_BETA_IPS`] of them; the rule they make.
pub fn check_beta_ips(field: &str, raw: &str) -> Result<super::gray::Rule, Invalid> {
    let ips: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|ip| !ip.is_empty())
        .collect();
    if ips.is_empty() {
        return Err(Invalid::missing(field));
    }
    if ips.len() > MAX_BETA_IPS {
        let problem = format!(
            "it names {} addresses; at most {MAX_BETA_IPS} are allowed.",
            ips.len()
        );
        return Err(Invalid::illegal(field, problem));
    }
    if let Some(bad) = ips
        .iter()
        .find(|ip| ip.parse::<std::net::IpAddr>().is_err())
    {
        let problem = format!("'{bad}' is not an IP address; give comma-separated IP addresses.");
        return Err(Invalid::illegal(field, problem));
    }
    super::gray::Rule::beta(raw).ok_or_else(|| Invalid::missing(field))
}

/// Checks a gray tag: 1 to [`MAX_TAG`] of letters, digits and `_-.:`; the rule it makes.
pub fn check_gray_tag(field: &str, tag: &str) -> Result<super::gray::Rule, Invalid> {
    if tag.is_empty() || tag.len() > MAX_TAG || !nacos_chars(tag) {
        return Err(Invalid::illegal(
            field,
            "it should be 1 to 64 characters of letters, digits and '_-.:'.",
        ));
    }
    Ok(super::gray::Rule::Tag {
        tag: tag.to_string(),
    })
}

/// Checks a tenant (namespace id): empty (`public`), or a namespace id.
pub fn check_tenant(field: &str, tenant: &str) -> Result<(), Invalid> {
    if tenant.is_empty() {
        Ok(())
    } else {
        check_namespace_id(field, tenant)
    }
}

/// Checks content: not blank, at most `max_bytes` bytes.
pub fn check_content(field: &str, content: &str, max_bytes: usize) -> Result<(), Invalid> {
    if content.trim().is_empty() {
        return Err(Invalid::missing(field));
    }
    if content.len() > max_bytes {
        return Err(Invalid::illegal(
            field,
            format!(
                "it is {} bytes; at most {max_bytes} are accepted (--config-max-content-bytes).",
                content.len()
            ),
        ));
    }
    Ok(())
}

/// Checks free text (an application name, a description): at most `max` bytes, no
/// control characters.
pub fn check_text(field: &str, text: &str, max: usize) -> Result<(), Invalid> {
    if text.len() > max || text.chars().any(char::is_control) {
        return Err(Invalid::illegal(
            field,
            format!("it should be at most {max} bytes without control characters."),
        ));
    }
    Ok(())
}

/// Checks a content type name: up to 32 letters, digits and `-_.`.
pub fn check_type(field: &str, r#type: &str) -> Result<(), Invalid> {
    let ok = r#type.len() <= MAX_TYPE
        && r#type
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Invalid::illegal(
            field,
            "it should be up to 32 letters, digits and '-_.' (text, yaml, json, ...).",
        ))
    }
}

/// Checks tags, comma-separated: at most 5, each at most 64 bytes of Nacos' characters
/// (and spaces). Returns them trimmed and joined by commas.
pub fn check_tags(field: &str, tags: &str) -> Result<String, Invalid> {
    let list: Vec<&str> = tags
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if list.len() > MAX_TAGS {
        return Err(Invalid::illegal(field, "at most 5 tags are accepted."));
    }
    for tag in &list {
        if tag.len() > MAX_TAG || !tag.bytes().all(|b| b == b' ' || nacos_chars_byte(b)) {
            return Err(Invalid::illegal(
                field,
                format!("tag '{tag}' should be at most 64 letters, digits and '_-.:'."),
            ));
        }
    }
    Ok(list.join(","))
}

fn nacos_chars_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_ids_and_groups_follow_nacos_characters() {
        check_data_id("dataId", "org.apache.dubbo.demo.DemoService").unwrap();
        check_data_id("dataId", "demo-provider:1.0.0:consumer:a_b").unwrap();
        let e = check_data_id("dataId", "a b").unwrap_err();
        assert!(e.to_string().contains("'dataId'"), "{e}");
        check_data_id("dataId", "a/b").unwrap_err();
        check_data_id("dataId", &"a".repeat(256)).unwrap_err();
        check_data_id("dataId", "").unwrap_err();
        check_config_group("group", "mapping").unwrap();
        check_config_group("group", "DEFAULT_GROUP").unwrap();
        check_config_group("group", "g@").unwrap_err();
        check_config_group("group", "").unwrap_err();
        check_tenant("tenant", "").unwrap();
        check_tenant("tenant", "dev-1").unwrap();
        check_tenant("tenant", "../x").unwrap_err();
    }

    #[test]
    fn content_must_have_something_and_fit() {
        check_content("content", "a=1", 16).unwrap();
        check_content("content", "  \n", 16).unwrap_err();
        let e = check_content("content", &"x".repeat(17), 16).unwrap_err();
        assert!(e.to_string().contains("17 bytes"), "{e}");
    }

    #[test]
    fn tags_are_few_and_short() {
        assert_eq!(check_tags("config_tags", " a, b ,,c").unwrap(), "a,b,c");
        check_tags("config_tags", "1,2,3,4,5,6").unwrap_err();
        check_tags("config_tags", "a\nb").unwrap_err();
        check_type("type", "yaml").unwrap();
        check_type("type", "ya ml").unwrap_err();
        check_text("appName", "shop", 128).unwrap();
        check_text("desc", "a\u{7}", 128).unwrap_err();
    }
}
