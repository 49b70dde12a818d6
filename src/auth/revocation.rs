//! Ended sessions, announced to whoever holds a credential of one open:
//! the WebSocket connections (`graphql::ws`), which close with 4403 when
//! their session ends.
//!
//! The announcement is in-process (a broadcast channel). Another process
//! learns of it when its connections re-check their session, at least
//! every `TRELLIS_WS_SESSION_RECHECK` seconds; a receiver that lagged
//! behind must re-check at once.

use tokio::sync::broadcast;
use uuid::Uuid;

use super::Viewer;

/// Which sessions just ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// One session (logout, refresh-token reuse).
    Session(Uuid),
    /// Every session of a user but one (a password change keeps the
    /// session that made it).
    UserExcept { user_id: Uuid, kept: Uuid },
}

impl Ended {
    /// Whether `viewer`'s credential is among the ended ones.
    pub fn ends(&self, viewer: &Viewer) -> bool {
        match *self {
            Ended::Session(session_id) => viewer.session_id == session_id,
            Ended::UserExcept { user_id, kept } => {
                viewer.user_id == user_id && viewer.session_id != kept
            }
        }
    }
}

/// The announcer; cheap to clone.
#[derive(Debug, Clone)]
pub struct Revocations {
    sender: broadcast::Sender<Ended>,
}

impl Default for Revocations {
    fn default() -> Self {
        // Announcements are rare; a receiver that falls this far behind
        // re-checks its session instead.
        let (sender, _) = broadcast::channel(256);
        Revocations { sender }
    }
}

impl Revocations {
    pub fn announce(&self, ended: Ended) {
        // No receiver (no open connection) is fine.
        let _ = self.sender.send(ended);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Ended> {
        self.sender.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    fn viewer(user_id: Uuid, session_id: Uuid) -> Viewer {
        Viewer {
            user_id,
            username: "u".into(),
            role: Role::Member,
            session_id,
        }
    }

    #[test]
    fn an_ended_session_ends_only_its_own_viewers() {
        let (user, session, other) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        assert!(Ended::Session(session).ends(&viewer(user, session)));
        assert!(!Ended::Session(other).ends(&viewer(user, session)));
    }

    #[test]
    fn a_password_change_ends_every_other_session_of_the_user() {
        let (user, kept, stolen, stranger) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        let change = Ended::UserExcept {
            user_id: user,
            kept,
        };
        assert!(change.ends(&viewer(user, stolen)));
        assert!(!change.ends(&viewer(user, kept)));
        assert!(!change.ends(&viewer(stranger, stolen)));
    }

    #[tokio::test]
    async fn receivers_hear_announcements() {
        let revocations = Revocations::default();
        let mut receiver = revocations.subscribe();
        let ended = Ended::Session(Uuid::now_v7());
        revocations.announce(ended);
        assert_eq!(receiver.recv().await.unwrap(), ended);
    }
}
