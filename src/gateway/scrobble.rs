//! Kavita → AniList scrobbling, the pure part: what a user's reading on
//! Kavita says (chapters read, rating, want-to-read), which AniList media a
//! series is, and which events a change makes. The job that reads Kavita
//! and admits the events is [`super::scrobbler`].

use serde::Deserialize;

use super::action::Action;

/// Kavita's volume number for chapters that belong to no volume.
pub const LOOSE_LEAF_VOLUME: f64 = -100_000.0;
/// Kavita's volume number for specials (not chapters of the story).
pub const SPECIAL_VOLUME: f64 = 100_000.0;
/// Kavita's chapter number for a file that is a whole volume.
pub const VOLUME_ONLY_CHAPTER: f64 = -100_000.0;

/// One volume of `GET /api/Series/volumes` (Kavita's `VolumeDto`, the
/// fields scrobbling reads).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub min_number: Option<f64>,
    /// Older servers: the volume number as an integer.
    #[serde(default)]
    pub number: Option<f64>,
    #[serde(default)]
    pub chapters: Vec<Chapter>,
}

/// One chapter of a volume (Kavita's `ChapterDto`).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chapter {
    #[serde(default)]
    pub id: u32,
    #[serde(default)]
    pub volume_id: u32,
    #[serde(default)]
    pub min_number: Option<f64>,
    #[serde(default)]
    pub max_number: Option<f64>,
    /// Older servers: the chapter number as text (`"12"`, `"12.5"`, `"-100000"`).
    #[serde(default)]
    pub number: Option<String>,
    #[serde(default)]
    pub pages: u32,
    #[serde(default)]
    pub pages_read: u32,
    #[serde(default)]
    pub is_special: bool,
}

impl Volume {
    fn number(&self) -> Option<f64> {
        self.min_number.or(self.number)
    }
}

impl Chapter {
    /// The highest chapter number this file covers.
    fn number(&self) -> Option<f64> {
        self.max_number
            .or(self.min_number)
            .or_else(|| self.number.as_deref()?.trim().parse().ok())
    }

    fn fully_read(&self) -> bool {
        self.pages > 0 && self.pages_read >= self.pages
    }
}

/// A chapter of the story as [`chapters_read`] counts it: its floored
/// number, if it is one.
fn story_number(volume: &Volume, chapter: &Chapter) -> Option<u32> {
    if volume.number() == Some(SPECIAL_VOLUME) || chapter.is_special || chapter.pages == 0 {
        return None;
    }
    chapter
        .number()
        .filter(|number| *number != VOLUME_ONLY_CHAPTER && *number > 0.0)
        .map(|number| number.floor().min(f64::from(super::action::MAX_CHAPTERS)) as u32)
}

/// AniList's progress for a series: the highest chapter number among the
/// chapters whose pages are all read (as Kavita's own scrobbling counts
/// it). Loose-leaf chapters (volume −100000) count like any; specials
/// (volume 100000, or marked special) and whole-volume files (chapter
/// −100000) are not chapters of the story and do not.
pub fn chapters_read(volumes: &[Volume]) -> u32 {
    volumes
        .iter()
        .flat_map(|volume| {
            volume
                .chapters
                .iter()
                .filter(|chapter| chapter.fully_read())
                .filter_map(move |chapter| story_number(volume, chapter))
        })
        .max()
        .unwrap_or(0)
}

/// One `POST /api/Reader/progress`: set a chapter's pages read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageWrite {
    pub chapter_id: u32,
    pub volume_id: u32,
    pub pages_read: u32,
}

/// The page writes that make [`chapters_read`] of a series exactly
/// `target`: every story chapter numbered up to `target` that is not fully
/// read gets all its pages, every fully read one numbered above it goes
/// back to none. Partly read chapters above `target`, specials and
/// whole-volume files are left as they are. `Err` (in words) when the
/// series has no chapter `target` to end on, so no writes could show it.
pub fn progress_writes(volumes: &[Volume], target: u32) -> Result<Vec<PageWrite>, String> {
    let story: Vec<(u32, &Chapter)> = volumes
        .iter()
        .flat_map(|volume| {
            volume
                .chapters
                .iter()
                .filter_map(move |chapter| Some((story_number(volume, chapter)?, chapter)))
        })
        .collect();
    if target > 0 && !story.iter().any(|(number, _)| *number == target) {
        return Err(format!(
            "the series has no chapter {target} (its chapters: {})",
            match story.iter().map(|(number, _)| *number).max() {
                Some(last) => format!("up to {last}"),
                None => "none, only volumes or specials".to_owned(),
            }
        ));
    }
    Ok(story
        .into_iter()
        .filter_map(|(number, chapter)| {
            let pages_read = if number <= target {
                (!chapter.fully_read()).then_some(chapter.pages)
            } else {
                chapter.fully_read().then_some(0)
            }?;
            Some(PageWrite {
                chapter_id: chapter.id,
                volume_id: chapter.volume_id,
                pages_read,
            })
        })
        .collect())
}

/// The AniList media id a series' web links name
/// (`https://anilist.co/manga/30013/One-Piece`), if one does. Kavita keeps
/// the links as one comma-separated text.
pub fn anilist_id_in(web_links: &str) -> Option<i64> {
    web_links.split(',').find_map(|link| {
        let url = url::Url::parse(link.trim()).ok()?;
        let host = url.host_str()?.trim_start_matches("www.");
        if host != "anilist.co" {
            return None;
        }
        let mut segments = url.path_segments()?;
        match segments.next()? {
            "manga" | "anime" => {}
            _ => return None,
        }
        let id: i64 = segments.next()?.parse().ok()?;
        (id > 0).then_some(id)
    })
}

/// A series as Kavita shows it to the user, for scrobbling.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Chapters read ([`chapters_read`]); 0 when nothing is read.
    pub chapters: u32,
    /// Kavita's rating, 0–5 (0: not rated).
    pub stars: f64,
    pub want_to_read: bool,
}

/// What the scrobbler last admitted for a media (`None`: nothing yet).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Marks {
    pub chapters: Option<u32>,
    pub stars: Option<f64>,
    pub want_to_read: bool,
}

/// The events a user's Kavita reading makes, compared with what was
/// already admitted: progress only forward (a re-read or an unread
/// chapter never rewinds AniList), a rating when it changed, want-to-read
/// once. A title being read is not also put on Planning.
pub fn plan(reading: &Reading, marks: &Marks) -> Vec<Action> {
    let mut actions = Vec::new();
    if reading.chapters > 0 && marks.chapters.is_none_or(|sent| reading.chapters > sent) {
        actions.push(Action::Progress {
            chapters: reading.chapters,
        });
    }
    if reading.stars > 0.0
        && marks
            .stars
            .is_none_or(|sent| (sent - reading.stars).abs() >= 0.05)
    {
        actions.push(Action::Rating {
            stars: reading.stars.min(5.0),
        });
    }
    if reading.want_to_read
        && !marks.want_to_read
        && reading.chapters == 0
        && marks.chapters.is_none()
    {
        actions.push(Action::WantToRead);
    }
    actions
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn volumes(value: serde_json::Value) -> Vec<Volume> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn chapters_read_is_the_highest_fully_read_chapter() {
        let read = volumes(json!([
            { "minNumber": 1, "chapters": [
                { "minNumber": 1, "maxNumber": 1, "pages": 20, "pagesRead": 20 },
                { "minNumber": 2, "maxNumber": 2, "pages": 20, "pagesRead": 20 },
                { "minNumber": 3, "maxNumber": 3, "pages": 20, "pagesRead": 7 }
            ]},
            { "minNumber": -100000, "chapters": [
                { "minNumber": 9, "maxNumber": 10, "pages": 30, "pagesRead": 30 }
            ]},
            { "minNumber": 100000, "chapters": [
                { "minNumber": 500, "maxNumber": 500, "pages": 5, "pagesRead": 5 }
            ]}
        ]));
        assert_eq!(
            chapters_read(&read),
            10,
            "loose-leaf counts, specials do not"
        );
    }

    #[test]
    fn whole_volume_files_and_specials_are_not_chapters() {
        let read = volumes(json!([
            { "minNumber": 1, "chapters": [
                { "minNumber": -100000, "maxNumber": -100000, "pages": 180, "pagesRead": 180 }
            ]},
            { "minNumber": 2, "chapters": [
                { "minNumber": 4, "maxNumber": 4, "pages": 0, "pagesRead": 0 },
                { "number": "7", "pages": 10, "pagesRead": 10, "isSpecial": true }
            ]}
        ]));
        assert_eq!(chapters_read(&read), 0);
        let older = volumes(json!([
            { "number": 1, "chapters": [ { "number": "12.5", "pages": 10, "pagesRead": 10 } ] }
        ]));
        assert_eq!(chapters_read(&older), 12);
    }

    /// What `writes` leave behind, applied to `volumes` by chapter id.
    fn applied(mut volumes: Vec<Volume>, writes: &[PageWrite]) -> Vec<Volume> {
        for volume in &mut volumes {
            for chapter in &mut volume.chapters {
                if let Some(write) = writes.iter().find(|w| w.chapter_id == chapter.id) {
                    chapter.pages_read = write.pages_read;
                }
            }
        }
        volumes
    }

    fn page(chapter_id: u32, volume_id: u32, pages_read: u32) -> PageWrite {
        PageWrite {
            chapter_id,
            volume_id,
            pages_read,
        }
    }

    #[test]
    fn progress_writes_end_exactly_on_the_target_chapter() {
        let series = volumes(json!([
            { "minNumber": 1, "chapters": [
                { "id": 11, "volumeId": 1, "minNumber": 1, "maxNumber": 1, "pages": 20, "pagesRead": 20 },
                { "id": 12, "volumeId": 1, "minNumber": 2, "maxNumber": 2, "pages": 20, "pagesRead": 3 },
                { "id": 13, "volumeId": 1, "minNumber": 3, "maxNumber": 3, "pages": 20, "pagesRead": 0 }
            ]},
            { "minNumber": -100000, "chapters": [
                { "id": 21, "volumeId": 2, "minNumber": 4, "maxNumber": 4, "pages": 10, "pagesRead": 10 },
                { "id": 22, "volumeId": 2, "minNumber": 5, "maxNumber": 5, "pages": 10, "pagesRead": 4 }
            ]},
            { "minNumber": 100000, "chapters": [
                { "id": 31, "volumeId": 3, "minNumber": 9, "maxNumber": 9, "pages": 5, "pagesRead": 5 }
            ]}
        ]));
        assert_eq!(chapters_read(&series), 4);
        // To 3: the chapters up to it completed, the read chapter 4 unread.
        let forward = progress_writes(&series, 3).unwrap();
        assert_eq!(
            forward,
            vec![page(12, 1, 20), page(13, 1, 20), page(21, 2, 0),]
        );
        assert_eq!(chapters_read(&applied(series.clone(), &forward)), 3);
        // Back to 1: the fully read chapter 4 is unread; partly read 5 and
        // the special are left alone.
        let back = progress_writes(&series, 1).unwrap();
        assert_eq!(back, vec![page(21, 2, 0)]);
        assert_eq!(chapters_read(&applied(series.clone(), &back)), 1);
        // Already counted at 4, but with gaps: the gaps are filled.
        assert_eq!(
            progress_writes(&series, 4).unwrap(),
            vec![page(12, 1, 20), page(13, 1, 20),]
        );
        // Already there: nothing to write.
        let there = applied(series.clone(), &forward);
        assert_eq!(progress_writes(&there, 3).unwrap(), vec![]);
        // Zero: nothing fully read remains.
        let none = progress_writes(&series, 0).unwrap();
        assert_eq!(chapters_read(&applied(series.clone(), &none)), 0);
        // No chapter 7 (specials do not count): refused, in words.
        let missing = progress_writes(&series, 7).unwrap_err();
        assert!(
            missing.contains("no chapter 7") && missing.contains("up to 5"),
            "{missing}"
        );
        let volumes_only = volumes(json!([{ "minNumber": 1, "chapters": [
            { "id": 1, "minNumber": -100000, "maxNumber": -100000, "pages": 100, "pagesRead": 0 }
        ]}]));
        assert!(
            progress_writes(&volumes_only, 1)
                .unwrap_err()
                .contains("only volumes")
        );
    }

    #[test]
    fn an_anilist_id_is_found_among_web_links() {
        assert_eq!(
            anilist_id_in("https://mangadex.org/title/x, https://anilist.co/manga/30013/One-Piece"),
            Some(30013)
        );
        assert_eq!(
            anilist_id_in("https://www.anilist.co/manga/104463"),
            Some(104463)
        );
        assert_eq!(anilist_id_in("https://anilist.co/user/joe"), None);
        assert_eq!(
            anilist_id_in("https://evil.example/anilist.co/manga/1"),
            None
        );
        assert_eq!(anilist_id_in(""), None);
        assert_eq!(anilist_id_in("not a url"), None);
    }

    #[test]
    fn a_change_makes_one_event_and_no_change_none() {
        let reading = Reading {
            chapters: 12,
            stars: 4.0,
            want_to_read: false,
        };
        assert_eq!(
            plan(&reading, &Marks::default()),
            vec![
                Action::Progress { chapters: 12 },
                Action::Rating { stars: 4.0 }
            ]
        );
        let sent = Marks {
            chapters: Some(12),
            stars: Some(4.0),
            want_to_read: false,
        };
        assert_eq!(plan(&reading, &sent), vec![]);
        let more = Reading {
            chapters: 13,
            ..reading.clone()
        };
        assert_eq!(plan(&more, &sent), vec![Action::Progress { chapters: 13 }]);
        let fewer = Reading {
            chapters: 3,
            ..reading.clone()
        };
        assert_eq!(plan(&fewer, &sent), vec![], "progress never rewinds");
    }

    #[test]
    fn want_to_read_is_sent_once_and_never_for_a_title_being_read() {
        let wanted = Reading {
            want_to_read: true,
            ..Reading::default()
        };
        assert_eq!(plan(&wanted, &Marks::default()), vec![Action::WantToRead]);
        let sent = Marks {
            want_to_read: true,
            ..Marks::default()
        };
        assert_eq!(plan(&wanted, &sent), vec![]);
        let reading = Reading {
            chapters: 2,
            want_to_read: true,
            ..Reading::default()
        };
        assert_eq!(
            plan(&reading, &Marks::default()),
            vec![Action::Progress { chapters: 2 }]
        );
    }
}
