//! Stand-ins for what Microsoft Entra ID needs outside storage, so that the Entra ID paths can
//! run against a real Azurite (`--oauth basic`, https) on this machine: a private CA and a
//! server certificate made for the test, tokens shaped like Entra's, a fake `az` on `PATH`, and
//! a small HTTP server playing a token endpoint (IMDS, App Service, Entra's OAuth endpoint).
//!
//! Azurite's basic OAuth checks a token's issuer, audience and lifetime, not its signature, so
//! the tokens made here are accepted or refused by the same rules Azure applies first.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// A private CA and a certificate it signed for `127.0.0.1` and `localhost`, as PEM files.
pub struct TestCa {
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl TestCa {
    pub fn create(dir: &Path) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "leasehold test CA");
        let ca_key = KeyPair::generate().expect("CA key");
        let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca, ca_key);

        let mut server =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("server params");
        server
            .distinguished_name
            .push(DnType::CommonName, "azurite.test");
        let server_key = KeyPair::generate().expect("server key");
        let server_cert = server
            .signed_by(&server_key, &issuer)
            .expect("server certificate");

        let ca_file = dir.join("ca.pem");
        let cert_file = dir.join("server.pem");
        let key_file = dir.join("server-key.pem");
        fs::write(&ca_file, ca_cert.pem()).unwrap();
        fs::write(&cert_file, server_cert.pem()).unwrap();
        fs::write(&key_file, server_key.serialize_pem()).unwrap();
        Self {
            ca_file,
            cert_file,
            key_file,
        }
    }
}

pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A token shaped like an Entra ID access token for storage: `audience` (storage wants
/// `https://storage.azure.com`), issued by a tenant, valid for an hour. The signature part is
/// random: it is the part of the token no log may ever show.
pub struct FakeToken {
    pub jwt: String,
    pub signature: String,
    pub expires_on: i64,
}

impl FakeToken {
    pub fn new(audience: &str) -> Self {
        let b64 = |s: &str| azure_core::base64::encode_url_safe(s.as_bytes());
        let now = unix_now();
        let tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47";
        let header = b64(r#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = b64(&format!(
            r#"{{"aud":"{audience}","iss":"https://sts.windows.net/{tenant}/","iat":{},"nbf":{},"exp":{},"oid":"8c2b9a3e-0000-4000-8000-1e1e1e1e1e1e","tid":"{tenant}"}}"#,
            now - 60,
            now - 60,
            now + 3600
        ));
        let signature = azure_core::base64::encode_url_safe(
            (0..48).map(|_| fastrand::u8(..)).collect::<Vec<u8>>(),
        );
        Self {
            jwt: format!("{header}.{claims}.{signature}"),
            signature,
            expires_on: now + 3600,
        }
    }

    /// What `az account get-access-token --output json` prints (Azure CLI 2.54 or newer).
    pub fn az_json(&self) -> String {
        format!(
            r#"{{"accessToken":"{}","expiresOn":"2099-01-01 00:00:00.000000","expires_on":{},"subscription":"00000000-0000-0000-0000-000000000000","tenant":"72f988bf-86f1-41af-91ab-2d7cd011db47","tokenType":"Bearer"}}"#,
            self.jwt, self.expires_on
        )
    }

    /// What IMDS and App Service answer.
    pub fn managed_identity_json(&self) -> String {
        format!(
            r#"{{"access_token":"{}","expires_on":"{}","expires_in":"3599","resource":"https://storage.azure.com","token_type":"Bearer"}}"#,
            self.jwt, self.expires_on
        )
    }

    /// What Entra's OAuth token endpoint answers.
    pub fn oauth_json(&self) -> String {
        format!(
            r#"{{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"{}"}}"#,
            self.jwt
        )
    }
}

/// A fake Azure CLI: an `az` script in its own folder (put it first on `PATH`) that records its
/// arguments and prints a token, or fails like a CLI that is not logged in.
pub struct FakeAz {
    pub dir: PathBuf,
    calls: PathBuf,
}

impl FakeAz {
    pub fn install(dir: &Path, answer: &str) -> Self {
        let bin = dir.join("az-bin");
        fs::create_dir_all(&bin).unwrap();
        let calls = dir.join("az-calls");
        let answer_file = dir.join("az-answer.json");
        fs::write(&answer_file, answer).unwrap();
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nif [ ! -s '{answer}' ]; then\n  echo \"ERROR: Please run 'az login' to setup account.\" >&2\n  exit 1\nfi\ncat '{answer}'\n",
            calls.display(),
            answer = answer_file.display(),
        );
        let az = bin.join("az");
        fs::write(&az, script).unwrap();
        fs::set_permissions(&az, fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir: bin, calls }
    }

    /// `PATH` with the fake `az` first.
    pub fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// The argument lists `az` was called with.
    pub fn calls(&self) -> Vec<String> {
        fs::read_to_string(&self.calls)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// One request the token endpoint received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET /path?query HTTP/1.1`
    pub line: String,
    /// Header lines, lowercased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A plain-http server on loopback answering every request with one configured status and
/// JSON body, and recording what it was asked. Stands in for IMDS, the App Service identity
/// endpoint, Entra's token endpoint (via `AZURE_AUTHORITY_HOST`), or any server a health check
/// is pointed at.
pub struct TokenEndpoint {
    pub port: u16,
    state: Arc<Endpoint>,
}

/// What the server answers, and what it was asked.
struct Endpoint {
    answer: Mutex<(u16, String)>,
    seen: Mutex<Vec<Seen>>,
}

impl TokenEndpoint {
    pub fn start(status: u16, body: &str) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Endpoint {
            answer: Mutex::new((status, body.to_owned())),
            seen: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(state.clone());
        crate::http::serve_in_background(listener, app);
        Self { port, state }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn answer(&self, status: u16, body: &str) {
        *self.state.answer.lock().unwrap() = (status, body.to_owned());
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }
}

async fn serve(
    axum::extract::State(state): axum::extract::State<Arc<Endpoint>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    state.seen.lock().unwrap().push(Seen {
        line: format!("{} {} {:?}", parts.method, parts.uri, parts.version),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let (status, body) = state.answer.lock().unwrap().clone();
    (
        axum::http::StatusCode::from_u16(status).expect("a status code"),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
