//! roster's web console: the single-page app built from `web/` by Vite into `dist/`,
//! embedded in the binary, and the [`router`] that serves it on every node.
//!
//! `/` is the app's page (revalidated on every load, so a new roster version is picked
//! up at once); `/assets/...` are content-hashed files, cached for a year. Text assets
//! are gzipped once, on first request, and served compressed to clients that accept
//! it. The app routes with the URL fragment (`/#/services`), so no other path needs
//! the server. `/nacos` and `/nacos/`, where Nacos serves its console, redirect here.
//!
//! Headers: the page gets its Content-Security-Policy here (tower-http's
//! `SetResponseHeaderLayer`, on HTML answers only), whose `connect-src` names this
//! server and the origins the server passes in ([`ConnectSources`]: the other members'
//! APIs, which the console calls when its own node stops answering); `X-Content-Type-Options`,
//! `X-Frame-Options` and `Referrer-Policy` come from the server's layers around every
//! answer, API and console alike (`roster::faces::http::nacos::service`).
//!
//! Why not tower-http's `CompressionLayer`: it compresses each response as it is sent,
//! so every load of the page would gzip the same embedded script bundle again (CPU per
//! request, at a fast level). The embedded files never change while the process runs,
//! so each is compressed once, at the best level, and the bytes are kept; only files
//! read from `--console-dir` (development) are compressed per request.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Component, PathBuf};
use std::sync::{Arc, OnceLock};

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use parking_lot::Mutex;
use rust_embed::RustEmbed;
use tower_http::set_header::SetResponseHeaderLayer;

#[derive(RustEmbed)]
#[folder = "dist/"]
struct Assets;

/// Hashed assets never change under their name.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// The page itself: always revalidate (cheap, thanks to the ETag).
const REVALIDATE: &str = "no-cache";
/// Smaller files are not worth compressing.
const GZIP_MIN_BYTES: usize = 1024;
/// The page may load only its own scripts and talk only to this server and the
/// [`ConnectSources`] (appended to `connect-src`, which comes last). Inline styles are
/// allowed: the component library injects its CSS at run time.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; font-src 'self' data:; object-src 'none'; \
                   base-uri 'self'; frame-ancestors 'none'; connect-src 'self'";

/// The origins (`scheme://host:port`) the page may call besides its own server, asked
/// for each time the page is served (cluster members come and go).
pub type ConnectSources = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Where the files come from.
#[derive(Clone)]
enum Source {
    /// Built into the binary.
    Embedded,
    /// Read from a directory on every request (console development).
    Dir(Arc<PathBuf>),
}

/// The console's routes; merge them ahead of the API (they need no credentials). With
/// `dir`, files are read from that directory on each request instead of the embedded
/// build, so a console under development is served without rebuilding roster.
pub fn router<S: Clone + Send + Sync + 'static>(
    dir: Option<PathBuf>,
    connect: ConnectSources,
) -> Router<S> {
    let source = match dir {
        Some(dir) => Source::Dir(Arc::new(dir)),
        None => Source::Embedded,
    };
    let (s1, s2, s3, s4) = (source.clone(), source.clone(), source.clone(), source);
    Router::new()
        .route("/", get(move |h: HeaderMap| index(s1.clone(), h)))
        .route("/index.html", get(move |h: HeaderMap| index(s2.clone(), h)))
        .route(
            "/favicon.svg",
            get(move |h: HeaderMap| {
                let source = s3.clone();
                async move { serve(&source, "favicon.svg", REVALIDATE, &h) }
            }),
        )
        .route(
            "/assets/{*path}",
            get(move |Path(path): Path<String>, h: HeaderMap| {
                let source = s4.clone();
                async move { serve(&source, &format!("assets/{path}"), IMMUTABLE, &h) }
            }),
        )
        .route("/nacos", get(to_console))
        .route("/nacos/", get(to_console))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            move |response: &Response| csp_for_html(response, &connect),
        ))
}

async fn index(source: Source, headers: HeaderMap) -> Response {
    serve(&source, "index.html", REVALIDATE, &headers)
}

/// The policy for an HTML answer (the page); scripts, styles and images need none.
fn csp_for_html(response: &Response, connect: &ConnectSources) -> Option<HeaderValue> {
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    html.then(|| policy(&connect()))
}

/// [`CSP`] with `sources` added to `connect-src`. A source that is not a plain
/// `scheme://host:port` (letters, digits and `.:-[]/` only) is left out, so a member's
/// address can never add a directive or a wildcard to the policy.
fn policy(sources: &[String]) -> HeaderValue {
    let mut csp = CSP.to_string();
    for source in sources {
        let plain = (source.starts_with("http://") || source.starts_with("https://"))
            && source
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".:-[]/".contains(&b));
        if plain {
            csp.push(' ');
            csp.push_str(source);
        }
    }
    HeaderValue::from_str(&csp).expect("the policy holds visible ASCII only")
}

async fn to_console() -> Redirect {
    Redirect::permanent("/")
}

/// A file's bytes, type and validator.
struct File {
    data: Cow<'static, [u8]>,
    mime: String,
    etag: String,
}

fn find(source: &Source, path: &str) -> Option<File> {
    match source {
        Source::Embedded => {
            let file = Assets::get(path)?;
            Some(File {
                etag: format!("\"{}\"", hex(&file.metadata.sha256_hash()[..16])),
                mime: file.metadata.mimetype().to_string(),
                data: file.data,
            })
        }
        Source::Dir(dir) => {
            // Only plain components: nothing outside the directory is ever read.
            let relative = std::path::Path::new(path);
            if !relative
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
            {
                return None;
            }
            let data = std::fs::read(dir.join(relative)).ok()?;
            Some(File {
                etag: format!("\"{:x}-{}\"", data.len(), hex(&data[..data.len().min(8)])),
                mime: mime_of(path).to_string(),
                data: Cow::Owned(data),
            })
        }
    }
}

/// Types of the files a Vite build makes (for files read from a directory).
fn mime_of(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html",
        Some("js" | "mjs") => "text/javascript",
        Some("css") => "text/css",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// One console file, with its type, validator and caching, gzipped when the client
/// takes it.
fn serve(source: &Source, path: &str, cache: &'static str, request: &HeaderMap) -> Response {
    let Some(file) = find(source, path) else {
        return (
            StatusCode::NOT_FOUND,
            format!("no such console file: /{path}"),
        )
            .into_response();
    };
    let File { data, mime, etag } = file;
    // Files read from a directory change under their name: never cache them.
    let cache = match source {
        Source::Embedded => cache,
        Source::Dir(_) => "no-store",
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, v);
    }
    let not_modified = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if not_modified {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    let content_type = if mime.starts_with("text/") || mime.ends_with("javascript") {
        format!("{mime}; charset=utf-8")
    } else {
        mime.clone()
    };
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    let body = data.into_owned();
    if compressible(&mime) && body.len() >= GZIP_MIN_BYTES && accepts_gzip(request) {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let compressed = match source {
            Source::Embedded => gzipped(path, &body).to_vec(),
            Source::Dir(_) => gzip(&body),
        };
        return (headers, compressed).into_response();
    }
    (headers, body).into_response()
}

fn compressible(mime: &str) -> bool {
    mime.starts_with("text/")
        || mime.ends_with("javascript")
        || mime.ends_with("json")
        || mime.ends_with("svg+xml")
}

fn accepts_gzip(request: &HeaderMap) -> bool {
    request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// The gzip of an embedded file, made once (see the top of this file for why not
/// per response).
fn gzipped(path: &str, body: &[u8]) -> Arc<[u8]> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<[u8]>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().get(path) {
        return hit.clone();
    }
    let compressed: Arc<[u8]> = gzip(body).into();
    cache.lock().insert(path.to_string(), compressed.clone());
    compressed
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    encoder.write_all(body).expect("gzip into memory");
    encoder.finish().expect("gzip into memory")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_taken_only_when_offered_without_q_zero() {
        let mut h = HeaderMap::new();
        assert!(!accepts_gzip(&h));
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("br, gzip;q=0.8"),
        );
        assert!(accepts_gzip(&h));
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzip;q=0, deflate"),
        );
        assert!(!accepts_gzip(&h));
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        assert!(!accepts_gzip(&h));
    }

    #[test]
    fn a_directory_never_serves_outside_itself() {
        let dir = std::env::temp_dir().join(format!("roster-console-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        std::fs::write(dir.join("assets/app.js"), "x").unwrap();
        let source = Source::Dir(Arc::new(dir.join("assets")));
        assert!(find(&source, "app.js").is_some());
        assert!(find(&source, "../assets/app.js").is_none());
        assert!(find(&source, "/etc/passwd").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn members_are_added_to_connect_src_and_nothing_else_is() {
        let csp = policy(&[
            "http://127.0.0.1:8849".into(),
            "https://[::1]:8850".into(),
            "http://evil; script-src *".into(),
            "*".into(),
            "javascript:alert(1)".into(),
        ]);
        let csp = csp.to_str().unwrap();
        assert!(
            csp.ends_with("connect-src 'self' http://127.0.0.1:8849 https://[::1]:8850"),
            "{csp}"
        );
        assert_eq!(csp.matches("script-src").count(), 1, "{csp}");
        assert!(policy(&[])
            .to_str()
            .unwrap()
            .ends_with("connect-src 'self'"));
    }

    #[test]
    fn the_page_is_embedded() {
        assert!(
            Assets::get("index.html").is_some(),
            "dist/index.html is built and embedded"
        );
    }
}
