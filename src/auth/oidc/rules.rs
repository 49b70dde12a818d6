//! OIDC login's pure decisions: where a finished login may send the
//! browser, what a new account is called, and which role a login grants.
//! No I/O; tested here.

use std::net::IpAddr;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::auth::Role;

/// Whose budget a new authorization spends: a login's is its address's
/// (an IPv6 address's /64, the block one host is usually given, so a host
/// cannot mint fresh budgets by walking its own subnet); a link's is the
/// signed-in account's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StartKey {
    Address(IpAddr),
    Account(Uuid),
}

pub fn start_key(link_for: Option<Uuid>, client_ip: IpAddr) -> StartKey {
    if let Some(user) = link_for {
        return StartKey::Account(user);
    }
    StartKey::Address(match client_ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
        v4 => v4,
    })
}

/// `return_to` as given at `/auth/oidc/start`, kept only when it is a path
/// on this server (`/feeds?x=1`): never an absolute or scheme-relative URL
/// (`https://…`, `//evil`, `/\evil`), never control characters, at most
/// 512 bytes. Anything else is `None` (the login ends at `/`).
pub fn safe_return_to(raw: &str) -> Option<String> {
    let ok = raw.starts_with('/')
        && !raw.starts_with("//")
        && !raw.starts_with("/\\")
        && raw.len() <= 512
        && !raw.chars().any(|c| c.is_control() || c == '\\');
    ok.then(|| raw.to_owned())
}

/// A username from the id_token's `claim` (falling back to the part of
/// `email` before `@`, then `user`), shaped to our rules: lower case, only
/// `a-z 0-9 . _ -`, starting with a letter or digit, at most 56 characters
/// (room for a `-NN` suffix).
pub fn base_username(claims: &Map<String, Value>, claim: &str) -> String {
    let candidates = [
        claims.get(claim).and_then(Value::as_str),
        claims
            .get("email")
            .and_then(Value::as_str)
            .and_then(|email| email.split('@').next()),
    ];
    candidates
        .into_iter()
        .flatten()
        .map(shape)
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "user".to_owned())
}

fn shape(raw: &str) -> String {
    let mapped: String = raw
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect();
    mapped
        .trim_start_matches(['.', '_', '-'])
        .chars()
        .take(56)
        .collect()
}

/// The `attempt`-th name to try for a new account: the base, then
/// `base-2`, `base-3`…
pub fn candidate_username(base: &str, attempt: u32) -> String {
    if attempt <= 1 {
        base.to_owned()
    } else {
        format!("{base}-{attempt}")
    }
}

/// The role an OIDC login grants when `admin_group` is configured: ADMIN
/// when the id_token's `groups` (a list of strings, or one string) holds
/// it, else MEMBER. `None` when no group is configured (roles are left
/// alone).
pub fn role_from_groups(claims: &Map<String, Value>, admin_group: Option<&str>) -> Option<Role> {
    let group = admin_group?;
    let member = match claims.get("groups") {
        Some(Value::Array(groups)) => groups.iter().any(|g| g.as_str() == Some(group)),
        Some(Value::String(one)) => one == group,
        _ => false,
    };
    Some(if member { Role::Admin } else { Role::Member })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn logins_spend_their_address_budget_and_links_their_account_budget() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let v4 = ip("203.0.113.7");
        assert_eq!(start_key(None, v4), StartKey::Address(v4));
        // One /64 is one budget; the next /64 is another.
        let a = start_key(None, ip("2001:db8:1:2:aaaa::1"));
        assert_eq!(a, start_key(None, ip("2001:db8:1:2:ffff:1:2:3")));
        assert_eq!(a, StartKey::Address(ip("2001:db8:1:2::")));
        assert_ne!(a, start_key(None, ip("2001:db8:1:3::1")));
        // An IPv4 client seen through a dual-stack socket is that IPv4 address.
        assert_eq!(
            start_key(None, ip("::ffff:203.0.113.7")),
            StartKey::Address(v4)
        );
        let user = Uuid::from_u128(7);
        assert_eq!(start_key(Some(user), v4), StartKey::Account(user));
    }

    #[test]
    fn only_local_paths_are_kept_as_return_to() {
        assert_eq!(safe_return_to("/feeds?x=1").as_deref(), Some("/feeds?x=1"));
        assert_eq!(safe_return_to("/").as_deref(), Some("/"));
        for bad in [
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "/ok\\..",
            "feeds",
            "",
            "/a\nb",
            "javascript:alert(1)",
        ] {
            assert_eq!(safe_return_to(bad), None, "{bad:?} kept");
        }
        assert_eq!(safe_return_to(&format!("/{}", "a".repeat(600))), None);
    }

    #[test]
    fn usernames_come_from_the_claim_then_the_email_then_a_default() {
        let named = claims(json!({ "preferred_username": "Alice Smith", "email": "a@x" }));
        assert_eq!(base_username(&named, "preferred_username"), "alice-smith");
        let email = claims(json!({ "email": "Bob.Jones@example.org" }));
        assert_eq!(base_username(&email, "preferred_username"), "bob.jones");
        let custom = claims(json!({ "nickname": "__Zed", "preferred_username": "z" }));
        assert_eq!(base_username(&custom, "nickname"), "zed");
        assert_eq!(base_username(&claims(json!({ "sub": "1" })), "x"), "user");
        assert_eq!(base_username(&claims(json!({ "x": "ünï" })), "x"), "n-");
        let long = claims(json!({ "x": "a".repeat(100) }));
        assert_eq!(base_username(&long, "x").len(), 56);
        for name in [
            base_username(&named, "preferred_username"),
            candidate_username("alice", 12),
        ] {
            assert!(
                crate::auth::normalize_username("u", &name).is_ok(),
                "{name}"
            );
        }
        assert_eq!(candidate_username("alice", 1), "alice");
        assert_eq!(candidate_username("alice", 3), "alice-3");
    }

    #[test]
    fn the_admin_group_decides_the_role_only_when_configured() {
        let admin = claims(json!({ "groups": ["staff", "trellis-admins"] }));
        let member = claims(json!({ "groups": ["staff"] }));
        let single = claims(json!({ "groups": "trellis-admins" }));
        let none = claims(json!({}));
        let group = Some("trellis-admins");
        assert_eq!(role_from_groups(&admin, group), Some(Role::Admin));
        assert_eq!(role_from_groups(&single, group), Some(Role::Admin));
        assert_eq!(role_from_groups(&member, group), Some(Role::Member));
        assert_eq!(role_from_groups(&none, group), Some(Role::Member));
        assert_eq!(role_from_groups(&admin, None), None);
    }
}
