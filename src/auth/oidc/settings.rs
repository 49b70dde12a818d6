//! OIDC login's settings (`TRELLIS_OIDC_*`), flattened into the command
//! line by the app; each is in `.env.example` and `docs/operations.md`.
//! Without `TRELLIS_OIDC_ISSUER`, OIDC login is off and nothing else here
//! matters.

use anyhow::{Context, bail};

use crate::{auth::keys::Credential, domain::PublicUrl};

#[derive(clap::Args, Debug, Clone)]
#[group(id = "oidc_settings")]
#[command(next_help_heading = "OIDC login")]
pub struct Settings {
    /// The identity provider's issuer URL, exactly as its id_tokens name it
    /// in `iss` (its discovery document is at
    /// `<issuer>/.well-known/openid-configuration`). Without it, OIDC login
    /// is off.
    #[arg(long, env = "TRELLIS_OIDC_ISSUER", global = true)]
    pub oidc_issuer: Option<String>,

    /// The client id Trellis is registered under at the provider.
    #[arg(long, env = "TRELLIS_OIDC_CLIENT_ID", global = true)]
    pub oidc_client_id: Option<String>,

    /// The client's secret (sent to the token endpoint only).
    #[arg(
        long,
        env = "TRELLIS_OIDC_CLIENT_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub oidc_client_secret: Option<Credential>,

    /// Where the provider sends the browser back. Default:
    /// `<TRELLIS_PUBLIC_URL>/auth/oidc/callback`.
    #[arg(long, env = "TRELLIS_OIDC_REDIRECT_URL", global = true)]
    pub oidc_redirect_url: Option<url::Url>,

    /// The scopes asked for, space-separated; `openid` is always asked for.
    #[arg(
        long,
        env = "TRELLIS_OIDC_SCOPES",
        default_value = "openid profile email",
        global = true
    )]
    pub oidc_scopes: String,

    /// The id_token claim a new account's username is made from.
    #[arg(
        long,
        env = "TRELLIS_OIDC_USERNAME_CLAIM",
        default_value = "preferred_username",
        global = true
    )]
    pub oidc_username_claim: String,

    /// A value of the id_token's `groups` claim that makes its holder an
    /// ADMIN (and its absence a MEMBER, checked at every OIDC login). Unset:
    /// OIDC never changes a role.
    #[arg(long, env = "TRELLIS_OIDC_ADMIN_GROUP", global = true)]
    pub oidc_admin_group: Option<String>,

    /// Create a MEMBER on the first login of an identity no account is
    /// linked to. Off: such a login is refused (403).
    #[arg(
        long,
        env = "TRELLIS_OIDC_AUTO_CREATE",
        default_value_t = true,
        action = clap::ArgAction::Set,
        global = true
    )]
    pub oidc_auto_create: bool,

    /// Refuse the `login` mutation (username and password): accounts sign
    /// in through the provider only. `trellis user add` and the configured
    /// first admin still work.
    #[arg(
        long,
        env = "TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN",
        default_value_t = false,
        action = clap::ArgAction::Set,
        global = true
    )]
    pub oidc_disable_password_login: bool,

    /// What the login page calls the provider. Default: the issuer's host.
    #[arg(long, env = "TRELLIS_OIDC_DISPLAY_NAME", global = true)]
    pub oidc_display_name: Option<String>,
}

/// The settings of a configured provider, checked.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Credential>,
    /// `None`: `<public URL>/auth/oidc/callback`, known once the listener bound.
    pub redirect_url: Option<url::Url>,
    /// `openid` first, then the others once each.
    pub scopes: Vec<String>,
    pub username_claim: String,
    pub admin_group: Option<String>,
    pub auto_create: bool,
    pub display_name: String,
}

impl OidcConfig {
    /// The redirect URL the provider must have registered.
    pub fn redirect_url(&self, public_url: &PublicUrl) -> Option<url::Url> {
        self.redirect_url
            .clone()
            .or_else(|| public_url.join(super::CALLBACK_PATH))
    }
}

impl Settings {
    /// The provider's configuration, `None` when OIDC login is off; an
    /// error for settings that cannot work together.
    pub fn config(&self) -> anyhow::Result<Option<OidcConfig>> {
        let Some(issuer) = self.oidc_issuer.as_deref().map(str::trim) else {
            if self.oidc_disable_password_login {
                bail!(
                    "TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN=true needs TRELLIS_OIDC_ISSUER: \
                     nobody could sign in"
                );
            }
            return Ok(None);
        };
        let parsed = url::Url::parse(issuer).context("TRELLIS_OIDC_ISSUER is not a URL")?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            bail!("TRELLIS_OIDC_ISSUER must be an http(s) URL with a host");
        }
        let client_id = self
            .oidc_client_id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .context("TRELLIS_OIDC_ISSUER is set but TRELLIS_OIDC_CLIENT_ID is not")?;
        let display_name = self
            .oidc_display_name
            .clone()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| parsed.host_str().unwrap_or(issuer).to_owned());
        Ok(Some(OidcConfig {
            issuer: issuer.to_owned(),
            client_id: client_id.to_owned(),
            client_secret: self.oidc_client_secret.clone(),
            redirect_url: self.oidc_redirect_url.clone(),
            scopes: scopes(&self.oidc_scopes),
            username_claim: self.oidc_username_claim.trim().to_owned(),
            admin_group: self
                .oidc_admin_group
                .clone()
                .filter(|group| !group.is_empty()),
            auto_create: self.oidc_auto_create,
            display_name,
        }))
    }
}

/// `openid` first (always asked for), then each other scope once.
pub fn scopes(configured: &str) -> Vec<String> {
    let mut scopes = vec!["openid".to_owned()];
    for scope in configured.split_whitespace() {
        if !scopes.iter().any(|known| known == scope) {
            scopes.push(scope.to_owned());
        }
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            oidc: Settings,
        }
        let mut args = vec!["trellis".to_owned()];
        for (flag, value) in pairs {
            args.push(format!("--{flag}={value}"));
        }
        <Cli as clap::Parser>::try_parse_from(args).unwrap().oidc
    }

    #[test]
    fn settings_that_cannot_work_are_refused_at_start_up() {
        assert!(settings(&[]).config().unwrap().is_none());
        let no_client = settings(&[("oidc-issuer", "https://idp.example.org")]).config();
        assert!(no_client.unwrap_err().to_string().contains("CLIENT_ID"));
        let locked_out = settings(&[("oidc-disable-password-login", "true")]).config();
        assert!(
            locked_out
                .unwrap_err()
                .to_string()
                .contains("nobody could sign in")
        );
        let not_http = settings(&[("oidc-issuer", "ftp://idp"), ("oidc-client-id", "t")]);
        assert!(not_http.config().is_err());
        let good = settings(&[
            ("oidc-issuer", "https://idp.example.org/realms/home"),
            ("oidc-client-id", "trellis"),
            ("oidc-scopes", "email groups"),
        ])
        .config()
        .unwrap()
        .unwrap();
        assert_eq!(good.issuer, "https://idp.example.org/realms/home");
        assert_eq!(good.display_name, "idp.example.org");
        assert_eq!(good.scopes, ["openid", "email", "groups"]);
        assert!(good.auto_create);
        assert_eq!(good.username_claim, "preferred_username");
    }

    #[test]
    fn openid_is_always_asked_for_once() {
        assert_eq!(scopes("profile email"), ["openid", "profile", "email"]);
        assert_eq!(scopes(" email openid  email"), ["openid", "email"]);
        assert_eq!(scopes(""), ["openid"]);
    }
}
