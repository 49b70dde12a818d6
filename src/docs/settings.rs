//! The docs mirror's settings (`TRELLIS_NOTION_*`, `TRELLIS_FEISHU_*`,
//! `TRELLIS_DOCS_*`), flattened into the command line by the app. Each is
//! in `.env.example` with its default; admins read them through GraphQL
//! (`docsSettings`) without the secrets.

use crate::auth::keys::Credential;

#[derive(clap::Args, Debug, Clone)]
#[group(id = "docs_settings")]
#[command(next_help_heading = "Docs mirror")]
pub struct Settings {
    /// Notion integration token (an internal integration's secret). Without
    /// it, Notion is skipped, not failed.
    #[arg(
        long,
        env = "TRELLIS_NOTION_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub notion_token: Option<Credential>,

    /// Notion's API, reached exactly as configured (even on loopback or a
    /// private network); redirects off it are refused.
    #[arg(
        long,
        env = "TRELLIS_NOTION_API_URL",
        default_value = "https://api.notion.com",
        global = true
    )]
    pub notion_api_url: url::Url,

    /// Requests per second to Notion's API, and separately to its asset
    /// downloads (Notion's documented average is 3).
    #[arg(long, env = "TRELLIS_NOTION_QPS", default_value_t = 3, global = true)]
    pub notion_qps: u32,

    /// Feishu (Lark) app id. Without it and the secret, Feishu is skipped.
    #[arg(long, env = "TRELLIS_FEISHU_APP_ID", global = true)]
    pub feishu_app_id: Option<String>,

    /// Feishu app secret.
    #[arg(
        long,
        env = "TRELLIS_FEISHU_APP_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub feishu_app_secret: Option<Credential>,

    /// Feishu's Open API, reached exactly as configured; redirects off it
    /// are refused.
    #[arg(
        long,
        env = "TRELLIS_FEISHU_API_URL",
        default_value = "https://open.feishu.cn",
        global = true
    )]
    pub feishu_api_url: url::Url,

    /// Requests per second to Feishu's API, and separately to its media
    /// downloads.
    #[arg(long, env = "TRELLIS_FEISHU_QPS", default_value_t = 5, global = true)]
    pub feishu_qps: u32,

    /// Wiki spaces to mirror: comma-separated space ids, or `all`.
    #[arg(
        long,
        env = "TRELLIS_FEISHU_WIKI_SPACES",
        default_value = "all",
        global = true
    )]
    pub feishu_wiki_spaces: String,

    /// Drive folder tokens to mirror, comma-separated (none by default).
    #[arg(
        long,
        env = "TRELLIS_FEISHU_DRIVE_FOLDERS",
        default_value = "",
        global = true
    )]
    pub feishu_drive_folders: String,

    /// Seconds between scheduled syncs; 0 disables them (`syncDocs` and
    /// `trellis docs sync` still run).
    #[arg(
        long,
        env = "TRELLIS_DOCS_SYNC_INTERVAL",
        default_value_t = 3600,
        global = true
    )]
    pub docs_sync_interval: u64,

    /// Every how many Notion runs one is full (delete and move detection)
    /// even when incremental would do.
    #[arg(
        long,
        env = "TRELLIS_DOCS_RECONCILE_EVERY_RUNS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub docs_reconcile_every_runs: u32,

    /// Days a trashed document stays under `.internal/trash/` before it is
    /// purged.
    #[arg(
        long,
        env = "TRELLIS_DOCS_TRASH_KEEP_DAYS",
        default_value_t = 30,
        global = true
    )]
    pub docs_trash_keep_days: u32,

    /// A Feishu bitable with at most this many rows is inlined as a table;
    /// a bigger one is its schema, row count and link.
    #[arg(
        long,
        env = "TRELLIS_DOCS_BITABLE_INLINE_MAX_ROWS",
        default_value_t = 200,
        global = true
    )]
    pub docs_bitable_inline_max_rows: u32,
}

impl Settings {
    /// Whether Notion has what it needs to run.
    pub fn notion_configured(&self) -> bool {
        self.notion_token.is_some()
    }

    /// Whether Feishu has what it needs to run.
    pub fn feishu_configured(&self) -> bool {
        self.feishu_app_id
            .as_deref()
            .is_some_and(|id| !id.trim().is_empty())
            && self.feishu_app_secret.is_some()
    }

    /// The configured wiki spaces: `None` for all of them.
    pub fn wiki_spaces(&self) -> Option<Vec<String>> {
        let spaces = list(&self.feishu_wiki_spaces);
        (!spaces.iter().any(|space| space.eq_ignore_ascii_case("all"))).then_some(spaces)
    }

    /// The configured drive folders.
    pub fn drive_folders(&self) -> Vec<String> {
        list(&self.feishu_drive_folders)
    }
}

/// A comma-separated list, blanks dropped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        docs: Settings,
    }

    fn parse(args: &[&str]) -> Settings {
        Cli::try_parse_from(std::iter::once("trellis").chain(args.iter().copied()))
            .unwrap()
            .docs
    }

    #[test]
    fn defaults_are_the_issue_s() {
        let settings = parse(&[]);
        assert_eq!(settings.notion_api_url.as_str(), "https://api.notion.com/");
        assert_eq!(settings.feishu_api_url.as_str(), "https://open.feishu.cn/");
        assert_eq!(
            (settings.notion_qps, settings.feishu_qps),
            (3, 5),
            "Notion's and Feishu's documented rates"
        );
        assert_eq!(settings.docs_sync_interval, 3600);
        assert_eq!(settings.docs_reconcile_every_runs, 10);
        assert_eq!(settings.docs_trash_keep_days, 30);
        assert_eq!(settings.docs_bitable_inline_max_rows, 200);
        assert!(!settings.notion_configured() && !settings.feishu_configured());
        assert_eq!(settings.wiki_spaces(), None, "all spaces by default");
        assert!(settings.drive_folders().is_empty());
    }

    #[test]
    fn platforms_are_configured_by_their_credentials() {
        let settings = parse(&[
            "--notion-token",
            "secret_abc",
            "--feishu-app-id",
            "cli_a",
            "--feishu-wiki-spaces",
            " 7001, ,7002 ",
            "--feishu-drive-folders",
            "fldA,fldB",
        ]);
        assert!(settings.notion_configured());
        assert!(
            !settings.feishu_configured(),
            "an app id without its secret"
        );
        assert_eq!(
            settings.wiki_spaces(),
            Some(vec!["7001".to_owned(), "7002".to_owned()])
        );
        assert_eq!(settings.drive_folders(), vec!["fldA", "fldB"]);
        let settings = parse(&["--feishu-app-id", "cli_a", "--feishu-app-secret", "s"]);
        assert!(settings.feishu_configured());
    }

    #[test]
    fn credentials_never_print() {
        let settings = parse(&["--notion-token", "secret_abc", "--feishu-app-secret", "xyz"]);
        let printed = format!("{settings:?}");
        assert!(
            !printed.contains("secret_abc") && !printed.contains("xyz"),
            "{printed}"
        );
        assert_eq!(settings.notion_token.unwrap().expose(), "secret_abc");
        assert!(
            Cli::try_parse_from(["trellis", "--notion-token", "  "]).is_err(),
            "a blank token is a mistake, not a credential"
        );
    }
}
