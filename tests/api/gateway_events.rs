//! Personal actions as confirmed events, against the loopback Kavita and
//! AniList fakes (`gateway_fakes`): confirmed only by a read-back, an
//! ambiguous write verified and not repeated (across a restart too), a
//! replay sends nothing, one title's writes never overlap while two titles
//! do, a refused credential parks events until the user links again, the
//! removal precondition, and the receipt budget.

use std::{sync::atomic::Ordering, time::Duration};

use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::{
    gateway::{Setup, link_anilist, link_kavita, start},
    helpers::{Backend, TestApp, Tokens},
    on_both_backends,
};

const EVENT_FIELDS: &str =
    "id provider action titleId value status reason attempts occurredAt confirmedAt";

async fn record_progress(
    app: &TestApp,
    user: &Tokens,
    media: &str,
    chapters: i32,
    at: &str,
) -> Value {
    let answer = app
        .gql(
            &format!(
                "mutation($t: ID!, $p: Int!, $at: DateTime) {{ recordProgress(provider: ANILIST, titleId: $t, progress: $p, occurredAt: $at) {{ {EVENT_FIELDS} }} }}"
            ),
            json!({ "t": media, "p": chapters, "at": at }),
        )
        .bearer(&user.access)
        .send()
        .await;
    answer.data()["recordProgress"].clone()
}

async fn submit(
    app: &TestApp,
    user: &Tokens,
    mutation: &str,
    provider: &str,
    title: &str,
) -> Value {
    let extra = if mutation == "setRating" {
        ", rating: 4"
    } else {
        ""
    };
    let answer = app
        .gql(
            &format!(
                "mutation($t: ID!) {{ {mutation}(provider: {provider}, titleId: $t{extra}) {{ {EVENT_FIELDS} }} }}"
            ),
            json!({ "t": title }),
        )
        .bearer(&user.access)
        .send()
        .await;
    answer.data()[mutation].clone()
}

async fn event(app: &TestApp, user: &Tokens, id: &str) -> Value {
    app.gql(
        &format!("query($id: ID!) {{ gatewayEvent(id: $id) {{ {EVENT_FIELDS} }} }}"),
        json!({ "id": id }),
    )
    .bearer(&user.access)
    .send()
    .await
    .data()["gatewayEvent"]
        .clone()
}

/// Polls until the event has `status` (bounded: everything is local; a
/// delivery that must back off waits its 5 s first step).
async fn wait_status(app: &TestApp, user: &Tokens, id: &str, status: &str) -> Value {
    for _ in 0..400 {
        let event = event(app, user, id).await;
        if event["status"] == status {
            return event;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "event {id} never reached {status}: {}",
        event(app, user, id).await
    );
}

async fn receipts(app: &TestApp, user: &Tokens) -> Vec<Value> {
    app.gql(
        "{ receipts { edges { node { eventId provider action titleId retention response expiresAt } } } }",
        json!({}),
    )
    .bearer(&user.access)
    .send()
    .await
    .data()["receipts"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| edge["node"].clone())
        .collect()
}

async fn with_anilist(backend: Backend) -> (Setup, Tokens) {
    let setup = start(backend).await;
    let alice = setup.app.member("alice").await;
    link_anilist(&setup, &alice, 7, "alice").await;
    (setup, alice)
}

async fn progress_is_confirmed_by_a_read_back_and_a_replay_sends_nothing(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    let app = &setup.app;
    let at = "2026-12-01T10:00:00Z";
    let admitted = record_progress(app, &alice, "30013", 12, at).await;
    assert_eq!(admitted["provider"], "ANILIST");
    assert_eq!(admitted["action"], "PROGRESS");
    assert_eq!(admitted["value"], json!({ "chapters": 12 }));
    let id = admitted["id"].as_str().unwrap().to_owned();
    let confirmed = wait_status(app, &alice, &id, "CONFIRMED").await;
    assert!(confirmed["confirmedAt"].is_string());
    let fake = &setup.anilist.fake;
    assert_eq!(fake.entry(7, 30013).unwrap()["progress"], 12);
    assert_eq!(fake.writes.count("7", "30013"), 1);
    let kept = receipts(app, &alice).await;
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["eventId"], id.as_str());
    assert_eq!(kept[0]["retention"], "RECONCILED");
    assert_eq!(kept[0]["response"]["progress"], 12);
    assert!(kept[0]["expiresAt"].is_string());

    // The same action again: the same event, and not one request upstream.
    let calls = fake.graphql_requests().len();
    let replay = record_progress(app, &alice, "30013", 12, at).await;
    assert_eq!(replay["id"], id.as_str());
    assert_eq!(replay["status"], "CONFIRMED");
    assert_eq!(fake.graphql_requests().len(), calls);
    assert_eq!(fake.writes.count("7", "30013"), 1);

    // Another user cannot see it.
    let bob = app.member("bob").await;
    assert!(event(app, &bob, &id).await.is_null());
    let bobs = app
        .gql("{ gatewayEvents { edges { node { id } } } }", json!({}))
        .bearer(&bob.access)
        .send()
        .await;
    assert_eq!(bobs.data()["gatewayEvents"]["edges"], json!([]));
    // And a signed-out caller gets nothing at all.
    let anonymous = app
        .gql("{ gatewayEvents { edges { node { id } } } }", json!({}))
        .send()
        .await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
}

async fn an_ambiguous_write_is_verified_by_read_back_not_repeated(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    let fake = &setup.anilist.fake;
    // AniList applies the write, then the answer is a 500.
    fake.writes.fail_after_apply.store(1, Ordering::SeqCst);
    let admitted = record_progress(&setup.app, &alice, "30013", 5, "2026-12-01T11:00:00Z").await;
    let id = admitted["id"].as_str().unwrap();
    let confirmed = wait_status(&setup.app, &alice, id, "CONFIRMED").await;
    assert_eq!(confirmed["attempts"], 1);
    assert_eq!(fake.entry(7, 30013).unwrap()["progress"], 5);
    assert_eq!(
        fake.writes.count("7", "30013"),
        1,
        "the read-back found the write applied, so it was not sent again"
    );
}

async fn an_ambiguous_slot_survives_a_restart_and_is_verified_first(backend: Backend) {
    let (mut setup, alice) = with_anilist(backend).await;
    let fake = &setup.anilist.fake;
    fake.writes.fail_after_apply.store(1, Ordering::SeqCst);
    let admitted = record_progress(&setup.app, &alice, "30013", 9, "2026-12-01T12:00:00Z").await;
    let id = admitted["id"].as_str().unwrap().to_owned();
    // Wait until the write went out and its outcome is unknown.
    for _ in 0..400 {
        if event(&setup.app, &alice, &id).await["attempts"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let db = setup.app.database().await;
    assert_eq!(
        slot_count(&db).await,
        1,
        "the slot is kept while the outcome is unknown"
    );
    setup.app.kill().await;
    setup.app.restart(&[]).await;
    wait_status(&setup.app, &alice, &id, "CONFIRMED").await;
    assert_eq!(setup.anilist.fake.writes.count("7", "30013"), 1);
    assert_eq!(
        slot_count(&db).await,
        0,
        "confirmation moved the slot to receipts"
    );
}

async fn one_titles_writes_never_overlap_while_two_titles_do(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    let fake = &setup.anilist.fake;
    fake.writes.delay_ms.store(300, Ordering::SeqCst);
    let mut ids = Vec::new();
    for (n, media) in [
        ("1", "30013"),
        ("2", "30013"),
        ("3", "30013"),
        ("1", "104463"),
    ] {
        let at = format!("2026-12-01T13:00:0{n}Z");
        let chapters = n.parse().unwrap();
        let event = record_progress(&setup.app, &alice, media, chapters, &at).await;
        ids.push(event["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        wait_status(&setup.app, &alice, id, "CONFIRMED").await;
    }
    assert_eq!(fake.writes.overlaps.load(Ordering::SeqCst), 0);
    assert!(
        fake.writes.most_at_once.load(Ordering::SeqCst) >= 2,
        "two titles were written at once"
    );
    // In order: the last progress for the title is the one that stands.
    assert_eq!(fake.entry(7, 30013).unwrap()["progress"], 3);
    assert_eq!(fake.writes.count("7", "30013"), 3);
    assert_eq!(fake.writes.count("7", "104463"), 1);
}

async fn a_refused_token_parks_events_until_the_user_links_again(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    setup.anilist.fake.revoke_tokens();
    let admitted = record_progress(&setup.app, &alice, "104463", 4, "2026-12-01T14:00:00Z").await;
    let id = admitted["id"].as_str().unwrap();
    let waiting = wait_status(&setup.app, &alice, id, "WAITING").await;
    assert!(
        waiting["reason"]
            .as_str()
            .unwrap()
            .contains("link the account again"),
        "{waiting}"
    );
    let links = setup
        .app
        .gql("{ providerLinks { provider status } }", json!({}))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(
        links.data()["providerLinks"],
        json!([{ "provider": "ANILIST", "status": "NEEDS_RELINK" }])
    );
    assert_eq!(setup.anilist.fake.writes.total(), 0);
    link_anilist(&setup, &alice, 7, "alice").await;
    wait_status(&setup.app, &alice, id, "CONFIRMED").await;
    assert_eq!(setup.anilist.fake.entry(7, 104463).unwrap()["progress"], 4);
}

async fn removal_keeps_an_entry_with_notes_and_removes_a_bare_one(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    let fake = &setup.anilist.fake;
    fake.put_entry(
        7,
        30013,
        json!({ "status": "PLANNING", "progress": 0, "score": 0, "notes": "ask Sam about it" }),
    );
    fake.put_entry(
        7,
        104463,
        json!({ "status": "PLANNING", "progress": 0, "score": 0, "notes": null }),
    );
    let kept = submit(&setup.app, &alice, "removeFromList", "ANILIST", "30013").await;
    let review = wait_status(&setup.app, &alice, kept["id"].as_str().unwrap(), "REVIEW").await;
    assert!(
        review["reason"].as_str().unwrap().contains("notes"),
        "{review}"
    );
    assert!(fake.entry(7, 30013).is_some(), "nothing was deleted");
    assert_eq!(fake.writes.count("7", "30013"), 0);

    let removed = submit(&setup.app, &alice, "removeFromList", "ANILIST", "104463").await;
    wait_status(
        &setup.app,
        &alice,
        removed["id"].as_str().unwrap(),
        "CONFIRMED",
    )
    .await;
    assert!(fake.entry(7, 104463).is_none());
    let receipts = receipts(&setup.app, &alice).await;
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0]["retention"], "PROTECTED");
    assert!(receipts[0]["expiresAt"].is_null());
}

async fn kavita_is_confirmed_only_by_read_back_with_the_users_own_key(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = app.member("alice").await;
    let fake = &setup.kavita.fake;

    // Not linked: the event waits for the user; the catalog key is never used.
    let early = submit(app, &alice, "addToWantToRead", "KAVITA", "1").await;
    let waiting = wait_status(app, &alice, early["id"].as_str().unwrap(), "WAITING").await;
    assert!(
        waiting["reason"]
            .as_str()
            .unwrap()
            .contains("link a Kavita account")
    );
    assert!(fake.journal.seen("/api/want-to-read").is_empty());
    assert!(fake.journal.seen("/api/want-to-read/add-series").is_empty());

    // Linking resumes it.
    assert!(
        link_kavita(app, &alice, "alice-kavita-key")
            .await
            .error_code()
            .is_none()
    );
    wait_status(app, &alice, early["id"].as_str().unwrap(), "CONFIRMED").await;
    assert!(
        fake.want_to_read
            .lock()
            .unwrap()
            .contains(&("alice".to_owned(), 1))
    );

    // Kavita answers `true` and stores nothing: not confirmed until a
    // read-back shows the rating, so the write goes out again.
    fake.ignore_writes.store(1, Ordering::SeqCst);
    let rated = submit(app, &alice, "setRating", "KAVITA", "2").await;
    let id = rated["id"].as_str().unwrap();
    let confirmed = wait_status(app, &alice, id, "CONFIRMED").await;
    assert_eq!(confirmed["attempts"], 1);
    assert_eq!(fake.writes.count("alice", "2"), 2);
    assert_eq!(
        fake.ratings.lock().unwrap().get(&("alice".to_owned(), 2)),
        Some(&4.0)
    );
    // Every personal request carried alice's own token, never the catalog account's.
    for path in [
        "/api/Series/update-rating",
        "/api/want-to-read/add-series",
        "/api/want-to-read",
    ] {
        for seen in fake.journal.seen(path) {
            let token = seen.authorization.as_deref().unwrap_or_default();
            assert!(token.starts_with("Bearer "), "{path}");
            let payload = token.split('.').nth(1).unwrap();
            let claims: Value = serde_json::from_slice(
                &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload)
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(claims["nameid"], "alice", "{path}");
        }
    }
}

async fn kavita_progress(app: &TestApp, user: &Tokens, series: &str, chapter: i32) -> Value {
    app.gql(
        &format!(
            "mutation($t: ID!, $p: Int!) {{ recordProgress(provider: KAVITA, titleId: $t, progress: $p) {{ {EVENT_FIELDS} }} }}"
        ),
        json!({ "t": series, "p": chapter }),
    )
    .bearer(&user.access)
    .send()
    .await
    .data()["recordProgress"]
        .clone()
}

async fn progress_is_written_to_kavita_chapter_by_chapter_and_read_back(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = app.member("alice").await;
    let fake = &setup.kavita.fake;
    assert!(
        link_kavita(app, &alice, "alice-kavita-key")
            .await
            .error_code()
            .is_none()
    );
    // Frieren: eight chapters of ten pages; 1–2 read, 3 half read.
    fake.read("alice", 2, 8, 2);

    // Stand at chapter 5: chapters 3, 4 and 5 are written, nothing else.
    let forward = kavita_progress(app, &alice, "2", 5).await;
    wait_status(app, &alice, forward["id"].as_str().unwrap(), "CONFIRMED").await;
    assert_eq!(fake.pages_read("alice", 2), [10, 10, 10, 10, 10, 0, 0, 0]);
    assert_eq!(fake.writes.count("alice", "2"), 3);
    let sent = fake.journal.seen("/api/Reader/progress");
    assert_eq!(sent.len(), 3);
    for (seen, chapter) in sent.iter().zip([2003, 2004, 2005]) {
        assert_eq!(
            seen.body,
            json!({ "volumeId": 200, "chapterId": chapter, "pageNum": 10, "seriesId": 2, "libraryId": 1 })
        );
        assert!(seen.authorization.is_some());
    }

    // Back to chapter 4: only chapter 5 is unread.
    let back = kavita_progress(app, &alice, "2", 4).await;
    wait_status(app, &alice, back["id"].as_str().unwrap(), "CONFIRMED").await;
    assert_eq!(fake.pages_read("alice", 2), [10, 10, 10, 10, 0, 0, 0, 0]);
    assert_eq!(fake.writes.count("alice", "2"), 4);

    // Kavita answers `true` and stores nothing: the read-back does not show
    // it, so the missing chapter goes out again, and only then it confirms.
    fake.ignore_writes.store(1, Ordering::SeqCst);
    let quirk = kavita_progress(app, &alice, "2", 5).await;
    let confirmed = wait_status(app, &alice, quirk["id"].as_str().unwrap(), "CONFIRMED").await;
    assert_eq!(confirmed["attempts"], 1);
    assert_eq!(fake.pages_read("alice", 2), [10, 10, 10, 10, 10, 0, 0, 0]);
    assert_eq!(
        fake.writes.count("alice", "2"),
        6,
        "the ignored write and its repeat"
    );

    // A chapter the series does not have: reviewed, nothing sent.
    let missing = kavita_progress(app, &alice, "2", 12).await;
    let review = wait_status(app, &alice, missing["id"].as_str().unwrap(), "REVIEW").await;
    assert!(
        review["reason"].as_str().unwrap().contains("no chapter 12"),
        "{review}"
    );
    assert_eq!(fake.writes.count("alice", "2"), 6);
    // The confirmed ones are receipts, with the chapters read-back.
    let kavita_receipts: Vec<Value> = receipts(app, &alice)
        .await
        .into_iter()
        .filter(|receipt| receipt["provider"] == "KAVITA" && receipt["action"] == "PROGRESS")
        .collect();
    assert_eq!(kavita_receipts.len(), 3);
}

async fn a_full_receipt_budget_sends_the_event_to_review(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    let db = setup.app.database().await;
    let backend = db.get_database_backend();
    let user = db
        .query_one_raw(Statement::from_string(
            backend,
            "SELECT id FROM users WHERE username = 'alice'",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<uuid::Uuid>(0)
        .unwrap();
    // 100,000 protected receipts: the seed's combined budget.
    let fill = match backend {
        sea_orm::DbBackend::Postgres => {
            "INSERT INTO gateway_receipts (fingerprint, event_id, user_id, provider, action, \
             title_id, response, retention, created_at, expires_at) \
             SELECT 'f' || n, $1, $1, 'anilist', 'REMOVAL', 'x', '{}', \
             'PROTECTED', now(), NULL FROM generate_series(1, 100000) AS n"
        }
        _ => {
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) \
             INSERT INTO gateway_receipts (fingerprint, event_id, user_id, provider, action, \
             title_id, response, retention, created_at, expires_at) \
             SELECT 'f' || i, $1, $1, 'anilist', 'REMOVAL', 'x', '{}', \
             'PROTECTED', '2026-12-01 00:00:00+00:00', NULL FROM n"
        }
    };
    db.execute_raw(Statement::from_sql_and_values(backend, fill, [user.into()]))
        .await
        .unwrap();
    let admitted = record_progress(&setup.app, &alice, "30013", 2, "2026-12-01T15:00:00Z").await;
    let review = wait_status(
        &setup.app,
        &alice,
        admitted["id"].as_str().unwrap(),
        "REVIEW",
    )
    .await;
    assert!(
        review["reason"].as_str().unwrap().contains("budget"),
        "{review}"
    );
    assert_eq!(setup.anilist.fake.writes.total(), 0);
}

async fn scrobble(app: &TestApp, user: &Tokens) {
    let answer = app
        .gql("mutation { scrobbleKavita { id } }", json!({}))
        .bearer(&user.access)
        .send()
        .await;
    let id = answer.data()["scrobbleKavita"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let task = crate::jobs::wait_terminal(app, &user.access, &id).await;
    assert_eq!(task["status"], "SUCCEEDED", "{task}");
}

async fn events_of(app: &TestApp, user: &Tokens) -> Vec<Value> {
    app.gql(
        &format!("{{ gatewayEvents(first: 100) {{ edges {{ node {{ {EVENT_FIELDS} }} }} }} }}"),
        json!({}),
    )
    .bearer(&user.access)
    .send()
    .await
    .data()["gatewayEvents"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| edge["node"].clone())
        .collect()
}

async fn all_confirmed(app: &TestApp, user: &Tokens) -> Vec<Value> {
    let events = events_of(app, user).await;
    for event in &events {
        wait_status(app, user, event["id"].as_str().unwrap(), "CONFIRMED").await;
    }
    events
}

async fn scrobbling_turns_kavita_reading_into_one_anilist_write_per_change(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    let app = &setup.app;
    assert!(
        link_kavita(app, &alice, "alice-kavita-key")
            .await
            .error_code()
            .is_none()
    );
    let (kavita, anilist) = (&setup.kavita.fake, &setup.anilist.fake);
    // Yotsuba&! (its web links name AniList 104463): chapters 1–5 read,
    // the 6th half; rated 4. One Piece (no web link): 2 read.
    kavita.read("alice", 1, 10, 5);
    kavita
        .ratings
        .lock()
        .unwrap()
        .insert(("alice".to_owned(), 1), 4.0);
    kavita.read("alice", 3, 50, 2);
    scrobble(app, &alice).await;

    let links = app
        .gql(
            "{ titleLinks { seriesId seriesName mediaId mediaTitle state source } }",
            json!({}),
        )
        .bearer(&alice.access)
        .send()
        .await;
    let links = links.data()["titleLinks"].as_array().unwrap().clone();
    let link = |series: &str| {
        links
            .iter()
            .find(|link| link["seriesId"] == series)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(link("1")["state"], "CONFIRMED");
    assert_eq!(link("1")["source"], "WEB_LINK");
    assert_eq!(link("1")["mediaId"], "104463");
    assert_eq!(link("3")["state"], "PROPOSED", "a search only proposes");
    assert_eq!(link("3")["mediaId"], "30013");
    assert_eq!(link("3")["mediaTitle"], "One Piece");
    assert!(link("2").is_null(), "Frieren was never read");

    let events = all_confirmed(app, &alice).await;
    assert_eq!(events.len(), 2, "{events:?}");
    let entry = anilist.entry(7, 104463).unwrap();
    assert_eq!(entry["progress"], 5);
    assert_eq!(entry["score"], 8.0, "4 stars in alice's POINT_10 format");
    assert_eq!(anilist.writes.count("7", "104463"), 2);
    assert_eq!(anilist.writes.count("7", "30013"), 0, "not confirmed yet");

    // Nothing changed: nothing new.
    scrobble(app, &alice).await;
    assert_eq!(events_of(app, &alice).await.len(), 2);

    // One more chapter, and the proposed link confirmed: one event each.
    kavita.read("alice", 1, 10, 6);
    let confirmed = app
        .gql(
            "mutation { confirmTitleLink(seriesId: \"3\") { state mediaId } }",
            json!({}),
        )
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(confirmed.data()["confirmTitleLink"]["state"], "CONFIRMED");
    scrobble(app, &alice).await;
    let events = all_confirmed(app, &alice).await;
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(anilist.entry(7, 104463).unwrap()["progress"], 6);
    assert_eq!(anilist.entry(7, 30013).unwrap()["progress"], 2);
    assert_eq!(anilist.writes.count("7", "104463"), 3);
    assert_eq!(anilist.writes.count("7", "30013"), 1);

    // The user can also name the media themselves; AniList must know it.
    let unknown = app
        .gql(
            "mutation { setTitleLink(seriesId: \"2\", mediaId: \"999999\") { state } }",
            json!({}),
        )
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(unknown.error_code(), Some("BAD_USER_INPUT"));
    let set = app
        .gql(
            "mutation { setTitleLink(seriesId: \"2\", mediaId: \"30013\") { state source mediaTitle } }",
            json!({}),
        )
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(
        set.data()["setTitleLink"],
        json!({ "state": "CONFIRMED", "source": "USER", "mediaTitle": "One Piece" })
    );
}

/// The manifest saved in `independent-actions.json` is authenticated: a
/// file with one flipped byte is rejected at start and replaced.
async fn a_tampered_saved_manifest_is_rejected_and_replaced(backend: Backend) {
    let mut setup = start(backend).await;
    let path = setup.app.data_dir().join("independent-actions.json");
    let saved = std::fs::read(&path).expect("the manifest is saved at start");
    let text = String::from_utf8(saved.clone()).unwrap();
    assert!(text.contains("\"mac\""));
    assert!(!text.contains("catalog-key"), "no credential in the file");
    let at = text.find("REMOVAL").expect("the features are saved");
    let mut tampered = saved.clone();
    tampered[at] ^= 0x01;
    std::fs::write(&path, &tampered).unwrap();
    setup.app.kill().await;
    setup.app.restart(&[]).await;
    let replaced = std::fs::read(&path).unwrap();
    assert_ne!(replaced, tampered, "the tampered file was not kept");
    let envelope: Value = serde_json::from_slice(&replaced).unwrap();
    assert!(envelope["mac"].is_string());
    assert!(
        String::from_utf8(replaced).unwrap().contains("REMOVAL"),
        "the current manifest was saved whole"
    );
}

/// A SQLite database at its page budget refuses writes with `STORAGE_FULL`
/// (nothing half-written), keeps serving reads, and counts the refusals.
async fn a_full_database_is_a_typed_error_not_a_silent_loss(backend: Backend) {
    let app = crate::helpers::spawn_app_with(
        backend,
        crate::helpers::AppOptions::default().env("TRELLIS_SQLITE_MAX_BYTES", "2097152"),
    )
    .await;
    let alice = app.member("alice").await;
    let mut refused = None;
    for n in 0..50_000 {
        let answer = app
            .gql(
                "mutation($p: Int!) { recordProgress(provider: ANILIST, titleId: \"30013\", progress: $p) { id } }",
                json!({ "p": n }),
            )
            .bearer(&alice.access)
            .send()
            .await;
        if let Some(code) = answer.error_code() {
            refused = Some((n, code.to_owned()));
            break;
        }
    }
    let (admitted, code) = refused.expect("the budget was reached");
    assert_eq!(code, "STORAGE_FULL");
    // Every admitted event is there; the refused one left nothing behind.
    let db = app.database().await;
    let count = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) AS n, MAX(value) AS v FROM gateway_events",
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(count.try_get::<i64>("", "n").unwrap(), i64::from(admitted));
    // Reads still work.
    let me = app
        .gql("{ me { username } }", json!({}))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(me.data()["me"]["username"], "alice");
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("trellis_storage_full_total") && !line.ends_with(" 0")),
        "the refusal is counted"
    );
}

crate::per_backend!([sqlite => Sqlite]; a_full_database_is_a_typed_error_not_a_silent_loss);

on_both_backends!(
    a_tampered_saved_manifest_is_rejected_and_replaced,
    scrobbling_turns_kavita_reading_into_one_anilist_write_per_change,
    progress_is_confirmed_by_a_read_back_and_a_replay_sends_nothing,
    an_ambiguous_write_is_verified_by_read_back_not_repeated,
    an_ambiguous_slot_survives_a_restart_and_is_verified_first,
    one_titles_writes_never_overlap_while_two_titles_do,
    a_refused_token_parks_events_until_the_user_links_again,
    removal_keeps_an_entry_with_notes_and_removes_a_bare_one,
    kavita_is_confirmed_only_by_read_back_with_the_users_own_key,
    progress_is_written_to_kavita_chapter_by_chapter_and_read_back,
    operators_retry_or_dismiss_events_waiting_for_review,
    reconciled_receipts_expire_after_seven_days_and_only_1024_are_kept,
    a_full_receipt_budget_sends_the_event_to_review,
);

async fn event_mutation(
    app: &TestApp,
    user: &Tokens,
    mutation: &str,
    id: &str,
) -> crate::helpers::GqlResponse {
    app.gql(
        &format!("mutation($id: ID!) {{ {mutation}(id: $id) {{ {EVENT_FIELDS} }} }}"),
        json!({ "id": id }),
    )
    .bearer(&user.access)
    .send()
    .await
}

async fn review_queue(app: &TestApp, user: &Tokens) -> crate::helpers::GqlResponse {
    app.gql(
        "{ gatewayEvents(status: REVIEW, allUsers: true) { edges { node { id reason } } } }",
        json!({}),
    )
    .bearer(&user.access)
    .send()
    .await
}

async fn operators_retry_or_dismiss_events_waiting_for_review(backend: Backend) {
    let (setup, alice) = with_anilist(backend).await;
    let app = &setup.app;
    let fake = &setup.anilist.fake;
    fake.put_entry(
        7,
        30013,
        json!({ "status": "PLANNING", "progress": 0, "score": 0, "notes": "ask Sam about it" }),
    );
    let kept = submit(app, &alice, "removeFromList", "ANILIST", "30013").await;
    let id = kept["id"].as_str().unwrap();
    wait_status(app, &alice, id, "REVIEW").await;

    // The review queue is the operators': a member sees only their own.
    let admin = app.admin().await;
    let refused = review_queue(app, &alice).await;
    assert_eq!(refused.error_code(), Some("FORBIDDEN"));
    let listed = review_queue(app, &admin).await;
    let edges = listed.data()["gatewayEvents"]["edges"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(edges.len(), 1);
    assert_eq!(edges[0]["node"]["id"], id);
    // Another member cannot touch it.
    let bob = app.member("bob").await;
    let foreign = event_mutation(app, &bob, "retryGatewayEvent", id).await;
    assert_eq!(foreign.error_code(), Some("NOT_FOUND"));

    // The notes were moved elsewhere: the operator retries, the bare entry goes.
    fake.put_entry(
        7,
        30013,
        json!({ "status": "PLANNING", "progress": 0, "score": 0, "notes": null }),
    );
    let retried = event_mutation(app, &admin, "retryGatewayEvent", id).await;
    assert_eq!(
        retried.data()["retryGatewayEvent"]["status"],
        "PENDING",
        "{}",
        retried.body
    );
    wait_status(app, &alice, id, "CONFIRMED").await;
    assert!(fake.entry(7, 30013).is_none());
    let again = event_mutation(app, &admin, "retryGatewayEvent", id).await;
    assert_eq!(again.error_code(), Some("CONFLICT"));

    // Dismissed by its owner: nothing more is sent, and it stays dismissed.
    fake.put_entry(
        7,
        104463,
        json!({ "status": "CURRENT", "progress": 12, "score": 0, "notes": null }),
    );
    let second = submit(app, &alice, "removeFromList", "ANILIST", "104463").await;
    let second_id = second["id"].as_str().unwrap();
    wait_status(app, &alice, second_id, "REVIEW").await;
    let dismissed = event_mutation(app, &alice, "dismissGatewayEvent", second_id).await;
    assert_eq!(
        dismissed.data()["dismissGatewayEvent"]["status"],
        "DISMISSED"
    );
    assert_eq!(
        event_mutation(app, &alice, "retryGatewayEvent", second_id)
            .await
            .error_code(),
        Some("CONFLICT")
    );
    assert!(fake.entry(7, 104463).is_some());
    assert_eq!(fake.writes.count("7", "104463"), 0);
    let db = app.database().await;
    assert_eq!(slot_count(&db).await, 0, "a dismissed event holds no slot");
}

/// Receipt slots held (reserved or sent, not yet receipts).
async fn slot_count(db: &sea_orm::DatabaseConnection) -> usize {
    db.query_all_raw(Statement::from_string(
        db.get_database_backend(),
        "SELECT fingerprint FROM gateway_receipt_slots",
    ))
    .await
    .unwrap()
    .len()
}

async fn count_receipts(db: &sea_orm::DatabaseConnection, retention: &str) -> i64 {
    db.query_one_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "SELECT COUNT(*) FROM gateway_receipts WHERE retention = $1",
        [retention.into()],
    ))
    .await
    .unwrap()
    .unwrap()
    .try_get_by_index::<i64>(0)
    .unwrap()
}

async fn reconciled_receipts_expire_after_seven_days_and_only_1024_are_kept(backend: Backend) {
    let (mut setup, alice) = with_anilist(backend).await;
    let first = record_progress(&setup.app, &alice, "30013", 3, "2026-12-01T10:00:00Z").await;
    let first_id = first["id"].as_str().unwrap().to_owned();
    wait_status(&setup.app, &alice, &first_id, "CONFIRMED").await;
    let listed = receipts(&setup.app, &alice).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["retention"], "RECONCILED");
    let at = |field: &str| {
        chrono::DateTime::parse_from_rfc3339(listed[0][field].as_str().unwrap()).unwrap()
    };
    let created = receipt_created_at(&setup.app).await;
    assert_eq!(at("expiresAt") - created, chrono::TimeDelta::days(7));
    // A removal's receipt is protected: it never expires by itself.
    setup.anilist.fake.put_entry(
        7,
        104463,
        json!({ "status": "PLANNING", "progress": 0, "score": 0 }),
    );
    let removal = submit(&setup.app, &alice, "removeFromList", "ANILIST", "104463").await;
    wait_status(
        &setup.app,
        &alice,
        removal["id"].as_str().unwrap(),
        "CONFIRMED",
    )
    .await;

    // 1,030 older reconciled receipts: the next confirmation keeps only
    // the newest 1,024 reconciled ones, its own and the first among them.
    let db = setup.app.database().await;
    let user = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT id FROM users WHERE username = 'alice'",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<uuid::Uuid>(0)
        .unwrap();
    let fill = match db.get_database_backend() {
        sea_orm::DbBackend::Postgres => {
            "INSERT INTO gateway_receipts (fingerprint, event_id, user_id, provider, action, \
             title_id, response, retention, created_at, expires_at) \
             SELECT 'old' || n, $1, $1, 'anilist', 'PROGRESS', 'x', '{}', \
             'RECONCILED', $2, $3 FROM generate_series(1, 1030) AS n"
        }
        _ => {
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1030) \
             INSERT INTO gateway_receipts (fingerprint, event_id, user_id, provider, action, \
             title_id, response, retention, created_at, expires_at) \
             SELECT 'old' || i, $1, $1, 'anilist', 'PROGRESS', 'x', '{}', \
             'RECONCILED', $2, $3 FROM n"
        }
    };
    let old = chrono::Utc::now() - chrono::TimeDelta::days(1);
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        fill,
        [
            user.into(),
            old.into(),
            (old + chrono::TimeDelta::days(7)).into(),
        ],
    ))
    .await
    .unwrap();
    assert_eq!(count_receipts(&db, "RECONCILED").await, 1031);
    let second = record_progress(&setup.app, &alice, "30013", 4, "2026-12-01T11:00:00Z").await;
    wait_status(
        &setup.app,
        &alice,
        second["id"].as_str().unwrap(),
        "CONFIRMED",
    )
    .await;
    assert_eq!(count_receipts(&db, "RECONCILED").await, 1024);
    assert_eq!(count_receipts(&db, "PROTECTED").await, 1, "never evicted");
    let mine: Vec<String> = receipts(&setup.app, &alice)
        .await
        .into_iter()
        .filter(|receipt| receipt["titleId"] == "30013")
        .map(|receipt| receipt["eventId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(mine.len(), 2, "the newest are kept: {mine:?}");
    assert!(mine.contains(&first_id));

    // Seven days on, the sweep deletes every reconciled receipt; the
    // protected one stays. (The sweep fires at start when it has not run.)
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "UPDATE gateway_receipts SET expires_at = $1 WHERE retention = 'RECONCILED'",
        [(chrono::Utc::now() - chrono::TimeDelta::seconds(1)).into()],
    ))
    .await
    .unwrap();
    db.execute_raw(Statement::from_string(
        db.get_database_backend(),
        "DELETE FROM periodic_runs WHERE name = 'gateway.sweep'",
    ))
    .await
    .unwrap();
    setup.app.kill().await;
    setup.app.restart(&[]).await;
    for _ in 0..400 {
        if count_receipts(&db, "RECONCILED").await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count_receipts(&db, "RECONCILED").await, 0);
    assert_eq!(count_receipts(&db, "PROTECTED").await, 1);
}

/// When the viewer's only receipt was created (read from the database:
/// the API shows `expiresAt`, and the oracle must not be the code's sum).
async fn receipt_created_at(app: &TestApp) -> chrono::DateTime<chrono::FixedOffset> {
    let db = app.database().await;
    let created: chrono::DateTime<chrono::Utc> = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT created_at FROM gateway_receipts",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index(0)
        .unwrap();
    created.into()
}
