//! The dashboard: `GET /dashboard`, a page embedded in the binary (plain HTML, CSS and JS, and
//! the vendored uPlot chart library with its licence), which reads the same JSON as scripts do
//! (`GET /v1/stats`, `GET /v1/stats/stream`, the rules routes).
//!
//! Every asset is served with its content type, an `ETag` (a digest of its bytes) and
//! `Cache-Control: no-cache`, so a browser keeps it and revalidates it in one round trip (a new
//! binary serves new bytes under the same name), and with a `Content-Security-Policy` that allows
//! scripts, styles and connections to this origin only, no inline script or style, and no HTML
//! sink without Trusted Types (the page builds its DOM with `textContent`: descriptors are
//! clients' text).
//!
//! Reading the figures needs no token unless the server has a dashboard token
//! (`--dashboard-token`): then the data routes (their [`super::extract::Reader`]) want
//! `Authorization: Bearer` with it or with an admin token. The page itself is public: it holds
//! no data and asks for the token when the data routes answer 401.

use std::sync::LazyLock;

use axum::body::Body;
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

use super::error::ErrorBody;
use super::{ApiError, ErrorCode};

/// The page's content security policy: everything from this origin only, nothing inline, no
/// framing, and DOM sinks that parse HTML refused (Trusted Types).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
require-trusted-types-for 'script'; trusted-types 'none'";

/// One embedded file.
struct Asset {
    /// Its name under `/dashboard/` (the page itself is `index.html`).
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        bytes: include_bytes!("../../dashboard/index.html"),
    },
    Asset {
        name: "dashboard.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../dashboard/dashboard.css"),
    },
    Asset {
        name: "dashboard.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/dashboard.js"),
    },
    Asset {
        name: "uPlot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/uPlot.iife.min.js"),
    },
    Asset {
        name: "uPlot.min.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../dashboard/uPlot.min.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        bytes: include_bytes!("../../dashboard/favicon.svg"),
    },
    Asset {
        name: "uPlot.LICENSE.txt",
        content_type: "text/plain; charset=utf-8",
        bytes: include_bytes!("../../dashboard/uPlot.LICENSE"),
    },
    // The modules `dashboard.js` imports.
    Asset {
        name: "format.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/format.js"),
    },
    Asset {
        name: "charts.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/charts.js"),
    },
    Asset {
        name: "stream.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/stream.js"),
    },
    Asset {
        name: "changes.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/changes.js"),
    },
    Asset {
        name: "reservations.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../dashboard/reservations.js"),
    },
];

/// Each asset's `ETag`, in [`ASSETS`]' order: a quoted prefix of the SHA-256 of its bytes.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let d = Sha256::digest(a.bytes);
            let hex: String = d.iter().take(12).map(|b| format!("{b:02x}")).collect();
            HeaderValue::from_str(&format!("\"{hex}\""))
                .unwrap_or(HeaderValue::from_static("\"0\""))
        })
        .collect()
});

/// The asset named `name`, with its headers; 304 when the browser's copy is current.
fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("the dashboard has no file `{name}`"),
        )
        .into_response();
    };
    let asset = &ASSETS[i];
    let etag = ETAGS
        .get(i)
        .cloned()
        .unwrap_or(HeaderValue::from_static("\"0\""));
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim() == etag.to_str().unwrap_or(""))
        });
    let status = if fresh {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let body = if fresh {
        Body::empty()
    } else {
        Body::from(asset.bytes)
    };
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::ETAG, etag);
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// The dashboard, a page that shows the figures of `/v1/stats` live.
#[utoipa::path(get, path = "/dashboard", tag = "figures", security(()), responses(
    (status = 200, description = "The page.", content_type = "text/html; charset=utf-8", body = String),
    (status = 304, description = "The browser's copy is current (`If-None-Match`)."),
))]
pub(super) async fn page(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// To the page, whose assets are named relative to `/dashboard` (so the dashboard works behind
/// a proxy that serves it under a prefix).
#[utoipa::path(get, path = "/dashboard/", tag = "figures", security(()), responses(
    (status = 308, description = "To `../dashboard`.", headers(("Location" = String))),
))]
pub(super) async fn slash() -> Response {
    (
        StatusCode::PERMANENT_REDIRECT,
        [(header::LOCATION, HeaderValue::from_static("../dashboard"))],
    )
        .into_response()
}

/// One of the page's files (its scripts, styles, icon, licence).
#[utoipa::path(get, path = "/dashboard/{file}", tag = "figures",
    security(()), params(("file" = String, Path, description = "The file's name.")),
    responses(
        (status = 200, description = "The file, with its content type.", content(
            (String = "text/javascript"),
            (String = "text/css"),
            (String = "text/html"),
            (String = "image/svg+xml"),
            (String = "text/plain"),
        )),
        (status = 304, description = "The browser's copy is current (`If-None-Match`)."),
        (status = 308, description = "`index.html`: to the page.", headers(("Location" = String))),
        (status = 400, description = "A path that is not UTF-8.", body = ErrorBody),
        (status = 404, description = "No such file (`not_found`).", body = ErrorBody),
    ),
)]
pub(super) async fn asset(
    headers: HeaderMap,
    file: Result<Path<String>, PathRejection>,
) -> Response {
    match file {
        // The page is `/dashboard` only: its files are named relative to that.
        Ok(Path(name)) if name == "index.html" => slash().await,
        Ok(Path(name)) => serve(&name, &headers),
        Err(e) => ApiError::bad_request(e.body_text()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_distinct_etag() {
        let mut tags: Vec<&HeaderValue> = ETAGS.iter().collect();
        assert_eq!(tags.len(), ASSETS.len());
        tags.sort_by_key(|t| t.as_bytes());
        tags.dedup();
        assert_eq!(tags.len(), ASSETS.len());
    }

    #[test]
    fn the_page_loads_only_its_own_files() {
        let html = std::str::from_utf8(ASSETS[0].bytes).unwrap_or("");
        for a in &ASSETS[1..5] {
            assert!(
                html.contains(&format!("\"dashboard/{}\"", a.name)),
                "index.html does not load {}",
                a.name
            );
        }
        // The other scripts are the modules the page's script imports.
        let scripts: String = ASSETS
            .iter()
            .filter(|a| a.name.ends_with(".js"))
            .map(|a| std::str::from_utf8(a.bytes).unwrap_or(""))
            .collect();
        for a in ASSETS[7..].iter() {
            assert!(
                scripts.contains(&format!("from \"./{}\"", a.name)),
                "no module imports {}",
                a.name
            );
        }
        assert!(!html.contains("<script>"), "no inline script");
        assert!(!html.contains("style="), "no inline style");
        assert!(!html.contains("http://") && !html.contains("https://"));
    }
}
