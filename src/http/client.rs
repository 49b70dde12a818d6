//! Who is on the other end of a request: the client address (believing
//! `X-Forwarded-For` only from trusted proxies) and whether the client
//! reached us over HTTPS. Pure functions over the peer and the headers.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Facts about the caller that the services need (rate limits, cookies, audit).
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub client_ip: IpAddr,
    /// The client used HTTPS (only known through a trusted proxy).
    pub https: bool,
    pub user_agent: Option<String>,
    /// `Origin` header, for cookie-authenticated WebSocket checks.
    pub origin: Option<String>,
    pub host: Option<String>,
}

impl RequestMeta {
    pub fn from_parts(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> Self {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let peer = peer.to_canonical();
        let peer_trusted = is_trusted(peer, trusted);
        let forwarded_for: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        RequestMeta {
            client_ip: client_ip(peer, &forwarded_for, trusted),
            https: peer_trusted
                && header("x-forwarded-proto")
                    .and_then(|proto| {
                        proto
                            .split(',')
                            .next()
                            .map(|p| p.trim().eq_ignore_ascii_case("https"))
                    })
                    .unwrap_or(false),
            user_agent: header("user-agent").map(|ua| ua.chars().take(256).collect()),
            origin: header("origin"),
            host: header("host"),
        }
    }
}

fn is_trusted(addr: IpAddr, trusted: &[IpNet]) -> bool {
    let addr = addr.to_canonical();
    trusted.iter().any(|net| net.contains(&addr))
}

/// The client address. When the peer is a trusted proxy, walk the
/// `X-Forwarded-For` chain from the right (the hop nearest us) past further
/// trusted proxies; the first untrusted address is the client. Anything a
/// client wrote to the left of that is ignored, so it cannot be spoofed.
pub fn client_ip(peer: IpAddr, forwarded_for: &[&str], trusted: &[IpNet]) -> IpAddr {
    let mut client = peer.to_canonical();
    if !is_trusted(client, trusted) {
        return client;
    }
    let hops = forwarded_for
        .iter()
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|hop| !hop.is_empty())
        .collect::<Vec<_>>();
    for hop in hops.into_iter().rev() {
        let Ok(addr) = hop.parse::<IpAddr>() else {
            // Garbage in the chain: the last address we could vouch for stands.
            return client;
        };
        client = addr.to_canonical();
        if !is_trusted(client, trusted) {
            return client;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn untrusted_peer_header_is_ignored() {
        let got = client_ip(ip("203.0.113.9"), &["1.2.3.4"], &nets(&["10.0.0.0/8"]));
        assert_eq!(got, ip("203.0.113.9"));
    }

    #[test]
    fn trusted_peer_yields_rightmost_untrusted_hop() {
        let trusted = nets(&["10.0.0.0/8"]);
        let got = client_ip(
            ip("10.0.0.2"),
            &["6.6.6.6, 198.51.100.7, 10.0.0.5"],
            &trusted,
        );
        assert_eq!(got, ip("198.51.100.7"));
    }

    #[test]
    fn multiple_headers_are_one_chain() {
        let trusted = nets(&["10.0.0.0/8"]);
        let got = client_ip(ip("10.0.0.2"), &["198.51.100.7", "10.0.0.5"], &trusted);
        assert_eq!(got, ip("198.51.100.7"));
    }

    #[test]
    fn garbage_or_missing_header_falls_back_to_last_trusted_hop() {
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &[], &trusted), ip("10.0.0.2"));
        assert_eq!(
            client_ip(ip("10.0.0.2"), &["1.1.1.1, not-an-ip, 10.0.0.9"], &trusted),
            ip("10.0.0.9")
        );
    }

    #[test]
    fn ipv4_mapped_peer_matches_ipv4_proxy_list() {
        let trusted = nets(&["127.0.0.1/32"]);
        let got = client_ip(ip("::ffff:127.0.0.1"), &["192.0.2.44"], &trusted);
        assert_eq!(got, ip("192.0.2.44"));
    }

    #[test]
    fn forwarded_proto_counts_only_from_trusted_peers() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        let trusted = nets(&["127.0.0.1/32"]);
        assert!(RequestMeta::from_parts(ip("127.0.0.1"), &headers, &trusted).https);
        assert!(!RequestMeta::from_parts(ip("192.0.2.1"), &headers, &trusted).https);
    }
}
