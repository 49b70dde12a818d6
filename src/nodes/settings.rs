//! The nodes domain's settings (`TRELLIS_NODE_CONFIG`), flattened into the
//! command line by the app.

use std::path::PathBuf;

use anyhow::Context;

use super::config::{DEFAULT_CONFIG, NodeConfig};

#[derive(clap::Args, Debug, Clone)]
#[group(id = "nodes_settings")]
#[command(next_help_heading = "Nodes")]
pub struct Settings {
    /// Node configuration file (TOML); the built-in default (`config/nodes.toml`) when unset.
    #[arg(long, env = "TRELLIS_NODE_CONFIG", global = true)]
    pub node_config: Option<PathBuf>,
}

impl Settings {
    /// The node configuration: the file `TRELLIS_NODE_CONFIG` names, or the
    /// built-in default. Invalid configurations stop start-up with every
    /// problem listed.
    pub fn load(&self) -> anyhow::Result<NodeConfig> {
        let (text, origin) = match &self.node_config {
            Some(path) => (
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading TRELLIS_NODE_CONFIG ({})", path.display()))?,
                path.display().to_string(),
            ),
            None => (
                DEFAULT_CONFIG.to_owned(),
                "the built-in node configuration".to_owned(),
            ),
        };
        NodeConfig::parse(&text).with_context(|| format!("in {origin}"))
    }
}
