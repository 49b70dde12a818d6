//! A loopback OpenID provider for OIDC login's tests, written from the
//! OpenID Connect Core and Discovery specs:
//!
//! - `GET /.well-known/openid-configuration`: the discovery document
//!   (`issuer` is the fake's base URL without a trailing slash, as
//!   Keycloak's realms are);
//! - `GET /jwks`: the published RS256 keys (`key1`, and after
//!   [`FakeIdp::rotate`] only `key2`);
//! - `GET /authorize`: when a person has "consented" ([`FakeIdp::consent`])
//!   redirects (302) back to `redirect_uri` with `code` and `state`;
//!   otherwise with `error=access_denied`;
//! - `POST /token`: trades a code once, checking the client's Basic
//!   credentials, the `redirect_uri` and the PKCE S256 verifier, for an
//!   access token and an id_token signed with the current key — flawed on
//!   request ([`Flaw`]: tampered, wrong `aud`, expired, wrong `nonce`).
//!
//! The keys are fixed test keys (`tests/fixtures/oidc/`), never used
//! anywhere else.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Form, Router,
    extract::{Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use base64::{
    Engine,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::docs_fakes::{Journal, Served, serve};

pub const CLIENT_ID: &str = "trellis";
pub const CLIENT_SECRET: &str = "trellis-client-secret";

const KEYS: [(&str, &str, &str); 2] = [
    (
        "key1",
        include_str!("../fixtures/oidc/key1.pem"),
        include_str!("../fixtures/oidc/key1.jwk.json"),
    ),
    (
        "key2",
        include_str!("../fixtures/oidc/key2.pem"),
        include_str!("../fixtures/oidc/key2.jwk.json"),
    ),
];

/// Someone who can sign in at the fake.
#[derive(Debug, Clone)]
pub struct Person {
    pub sub: String,
    pub username: String,
    pub groups: Vec<String>,
}

impl Person {
    pub fn new(sub: &str, username: &str) -> Self {
        Person {
            sub: sub.to_owned(),
            username: username.to_owned(),
            groups: Vec::new(),
        }
    }

    pub fn in_group(mut self, group: &str) -> Self {
        self.groups.push(group.to_owned());
        self
    }
}

/// What is wrong with the next id_token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// Its payload altered after signing (`sub` swapped).
    Tampered,
    /// `aud` names another client.
    WrongAudience,
    /// `exp` ten minutes ago.
    Expired,
    /// `nonce` is not the one the login sent.
    WrongNonce,
}

struct Grant {
    person: Person,
    nonce: String,
    redirect_uri: String,
    challenge: String,
}

#[derive(Default)]
struct Keys {
    signing: usize,
    published: Vec<usize>,
}

pub struct FakeIdp {
    pub journal: Journal,
    issuer: Mutex<String>,
    consenting: Mutex<Option<(Person, Option<Flaw>)>>,
    grants: Mutex<HashMap<String, Grant>>,
    flaws: Mutex<HashMap<String, Option<Flaw>>>,
    keys: Mutex<Keys>,
}

impl FakeIdp {
    /// The issuer, exactly as its documents and tokens name it.
    pub fn issuer(&self) -> String {
        self.issuer.lock().unwrap().clone()
    }

    /// The next authorization signs `person` in, with an id_token flawed
    /// by `flaw` if given.
    pub fn consent(&self, person: &Person, flaw: Option<Flaw>) {
        *self.consenting.lock().unwrap() = Some((person.clone(), flaw));
    }

    /// The next authorization is declined (`error=access_denied`).
    pub fn decline(&self) {
        *self.consenting.lock().unwrap() = None;
    }

    /// Signs with `key2` from now on and publishes only it.
    pub fn rotate(&self) {
        let mut keys = self.keys.lock().unwrap();
        keys.signing = 1;
        keys.published = vec![1];
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.journal.seen("/jwks").len()
    }

    /// How many times the discovery document was fetched.
    pub fn discovery_fetches(&self) -> usize {
        self.journal.seen("/.well-known/openid-configuration").len()
    }

    fn id_token(&self, grant: &Grant, flaw: Option<Flaw>) -> String {
        let now = chrono::Utc::now().timestamp();
        let mut claims = json!({
            "iss": self.issuer(),
            "sub": grant.person.sub,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": grant.nonce,
            "preferred_username": grant.person.username,
            "email": format!("{}@idp.test", grant.person.username),
            "groups": grant.person.groups,
        });
        match flaw {
            Some(Flaw::WrongAudience) => claims["aud"] = json!("another-client"),
            Some(Flaw::Expired) => {
                claims["iat"] = json!(now - 1200);
                claims["exp"] = json!(now - 600);
            }
            Some(Flaw::WrongNonce) => claims["nonce"] = json!("nc_not-this-login"),
            Some(Flaw::Tampered) | None => {}
        }
        let index = self.keys.lock().unwrap().signing;
        let (kid, pem, _) = KEYS[index];
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_owned());
        let key = EncodingKey::from_rsa_der(&pkcs1_der(pem));
        let token = jsonwebtoken::encode(&header, &claims, &key).expect("signs");
        if flaw != Some(Flaw::Tampered) {
            return token;
        }
        let parts: Vec<&str> = token.split('.').collect();
        claims["sub"] = json!("someone-else");
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        format!("{}.{payload}.{}", parts[0], parts[2])
    }
}

/// The DER bytes of a PEM-armoured (PKCS #1) private key.
fn pkcs1_der(pem: &str) -> Vec<u8> {
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    STANDARD.decode(body).expect("the test key is base64")
}

pub async fn serve_idp() -> Served<FakeIdp> {
    let served = serve(
        FakeIdp {
            journal: Journal::default(),
            issuer: Mutex::default(),
            consenting: Mutex::default(),
            grants: Mutex::default(),
            flaws: Mutex::default(),
            keys: Mutex::new(Keys {
                signing: 0,
                published: vec![0],
            }),
        },
        |fake| {
            Router::new()
                .route("/.well-known/openid-configuration", get(discovery))
                .route("/jwks", get(jwks))
                .route("/authorize", get(authorize))
                .route("/token", post(token))
                .with_state(fake)
        },
    )
    .await;
    *served.fake.issuer.lock().unwrap() = served.base.as_str().trim_end_matches('/').to_owned();
    served
}

async fn discovery(State(fake): State<Arc<FakeIdp>>, headers: HeaderMap) -> Response {
    fake.journal.record(
        &axum::http::Method::GET,
        &"/.well-known/openid-configuration".parse().unwrap(),
        &headers,
        b"",
    );
    let issuer = fake.issuer();
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", "profile", "email", "groups"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
    .into_response()
}

async fn jwks(State(fake): State<Arc<FakeIdp>>, headers: HeaderMap) -> Response {
    fake.journal.record(
        &axum::http::Method::GET,
        &"/jwks".parse().unwrap(),
        &headers,
        b"",
    );
    let published = fake.keys.lock().unwrap().published.clone();
    let keys: Vec<Value> = published
        .into_iter()
        .map(|index| serde_json::from_str(KEYS[index].2).unwrap())
        .collect();
    axum::Json(json!({ "keys": keys })).into_response()
}

async fn authorize(
    State(fake): State<Arc<FakeIdp>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let param = |name: &str| query.get(name).cloned().unwrap_or_default();
    let redirect_uri = param("redirect_uri");
    let mut back = url::Url::parse(&redirect_uri).expect("an absolute redirect_uri");
    let ok = param("response_type") == "code"
        && param("client_id") == CLIENT_ID
        && param("code_challenge_method") == "S256"
        && param("scope").split(' ').any(|scope| scope == "openid");
    assert!(ok, "a well-formed authorization request: {query:?}");
    let consenting = fake.consenting.lock().unwrap().clone();
    match consenting {
        Some((person, flaw)) => {
            let code = format!("code-{}", uuid::Uuid::new_v4().simple());
            fake.grants.lock().unwrap().insert(
                code.clone(),
                Grant {
                    person,
                    nonce: param("nonce"),
                    redirect_uri: redirect_uri.clone(),
                    challenge: param("code_challenge"),
                },
            );
            fake.flaws.lock().unwrap().insert(code.clone(), flaw);
            back.query_pairs_mut()
                .append_pair("code", &code)
                .append_pair("state", &param("state"));
        }
        None => {
            back.query_pairs_mut()
                .append_pair("error", "access_denied")
                .append_pair("state", &param("state"));
        }
    }
    (StatusCode::FOUND, [(header::LOCATION, back.to_string())]).into_response()
}

fn token_error(error: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": error })),
    )
        .into_response()
}

async fn token(
    State(fake): State<Arc<FakeIdp>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    fake.journal.record(
        &axum::http::Method::POST,
        &"/token".parse().unwrap(),
        &headers,
        b"",
    );
    let expected = format!(
        "Basic {}",
        STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(&expected)
    {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({ "error": "invalid_client" })),
        )
            .into_response();
    }
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    if field("grant_type") != "authorization_code" {
        return token_error("unsupported_grant_type");
    }
    let code = field("code");
    let Some(grant) = fake.grants.lock().unwrap().remove(&code) else {
        return token_error("invalid_grant");
    };
    let flaw = fake.flaws.lock().unwrap().remove(&code).flatten();
    let verifier_matches = URL_SAFE_NO_PAD
        .encode(Sha256::digest(field("code_verifier").as_bytes()))
        == grant.challenge;
    if !verifier_matches || field("redirect_uri") != grant.redirect_uri {
        return token_error("invalid_grant");
    }
    axum::Json(json!({
        "access_token": format!("at-{}", uuid::Uuid::new_v4().simple()),
        "token_type": "Bearer",
        "expires_in": 300,
        "id_token": fake.id_token(&grant, flaw),
    }))
    .into_response()
}
