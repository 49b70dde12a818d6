//! Feed dates as real feeds write them (pure): RFC 3339 and RFC 2822 first,
//! then ISO-like dates with a space or no seconds, then a lenient reading of
//! words and numbers — English, German, French, Spanish, Italian, Dutch and
//! Portuguese month names, ordinals (`16th`), 12-hour clocks (`3:09pm`,
//! `10:57 a.m.`), named zones (`EST`, `CEST`, `GMT-07:00`), numeric dates
//! (`03/30/2020`, `26/06/2020`, `30.10.23`) and Unix timestamps. `None`
//! when nothing sensible is there: the item is then undated (it keeps its
//! arrival time and says so), never dated by a guess.
//!
//! A zone name we do not know (an IANA name such as `Europe/Brussels`) is
//! read as UTC: the day is right, the hour may be off by the zone's offset.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveTime, TimeZone, Utc};

/// The instant `text` names, if it names one.
pub fn parse(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(date) = DateTime::parse_from_rfc3339(text)
        && offset_in_range(date.offset().local_minus_utc())
    {
        return Some(date.with_timezone(&Utc));
    }
    if let Ok(date) = DateTime::parse_from_rfc2822(text) {
        return Some(date.with_timezone(&Utc));
    }
    if text.len() >= 9 && text.len() <= 11 && text.bytes().all(|b| b.is_ascii_digit()) {
        return DateTime::from_timestamp(text.parse().ok()?, 0);
    }
    iso_like(text).or_else(|| lenient(text)).filter(plausible)
}

fn plausible(date: &DateTime<Utc>) -> bool {
    (1900..=2200).contains(&date.year())
}

/// `YYYY-MM-DD[( |T)hh:mm[:ss[.fff]]][zone]`.
fn iso_like(text: &str) -> Option<DateTime<Utc>> {
    let date = NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()?;
    let rest = text[10..].trim_start_matches(['T', 't', ' ']);
    if rest.is_empty() {
        return Some(Utc.from_utc_datetime(&date.and_time(NaiveTime::MIN)));
    }
    let time_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(rest.len());
    let time = clock(rest[..time_len].split('.').next()?)?;
    let zone = rest[time_len..].trim();
    // `-05:00Z`: an offset with a stray `Z` after it.
    let zone = zone
        .strip_suffix(['Z', 'z'])
        .filter(|z| !z.is_empty())
        .unwrap_or(zone);
    let offset = if zone.is_empty() {
        0
    } else {
        zone_offset(zone)?
    };
    at(date, time, offset)
}

/// `hh:mm[:ss]`.
fn clock(text: &str) -> Option<NaiveTime> {
    let mut parts = text.split(':').map(|part| part.parse::<u32>().ok());
    let hour = parts.next()??;
    let minute = parts.next()??;
    let second = parts.next().unwrap_or(Some(0))?;
    if parts.next().is_some() {
        return None;
    }
    NaiveTime::from_hms_opt(hour, minute, second.min(59))
}

/// Real zones run from UTC−12 to UTC+14.
fn offset_in_range(offset: i32) -> bool {
    (-12 * 3600..=14 * 3600).contains(&offset)
}

/// `date` at `time` in a zone `offset` seconds east of UTC (an offset out of
/// range, as some feeds write, counts as UTC).
fn at(date: NaiveDate, time: NaiveTime, offset: i32) -> Option<DateTime<Utc>> {
    let zone = FixedOffset::east_opt(offset)
        .filter(|_| offset_in_range(offset))
        .unwrap_or(FixedOffset::east_opt(0)?);
    zone.from_local_datetime(&date.and_time(time))
        .single()
        .map(|date| date.with_timezone(&Utc))
}

/// `Z`, `+hhmm`, `-hh:mm`, `+hh`, `GMT+0000`, `UTC-07:00`, or a named zone.
fn zone_offset(zone: &str) -> Option<i32> {
    let upper = zone.to_ascii_uppercase();
    let numeric = upper
        .strip_prefix("GMT")
        .or_else(|| upper.strip_prefix("UTC"))
        .unwrap_or(&upper);
    if let Some(sign) = numeric.chars().next().filter(|c| *c == '+' || *c == '-') {
        let digits: String = numeric[1..].chars().filter(|c| *c != ':').collect();
        if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (hours, minutes) = match digits.len() {
            1 | 2 => (digits.parse::<i32>().ok()?, 0),
            3 => (
                digits[..1].parse::<i32>().ok()?,
                digits[1..].parse::<i32>().ok()?,
            ),
            _ => (
                digits[..2].parse::<i32>().ok()?,
                digits[2..].parse::<i32>().ok()?,
            ),
        };
        let seconds = hours * 3600 + minutes * 60;
        return Some(if sign == '-' { -seconds } else { seconds });
    }
    let hours: f32 = match numeric {
        "" | "Z" | "UT" | "UTC" | "GMT" | "WET" | "Z0" => 0.0,
        "EST" => -5.0,
        "EDT" => -4.0,
        "CST" => -6.0,
        "CDT" => -5.0,
        "MST" => -7.0,
        "MDT" => -6.0,
        "PST" => -8.0,
        "PDT" => -7.0,
        "AKST" => -9.0,
        "AKDT" => -8.0,
        "HST" => -10.0,
        "AST" => -4.0,
        "ADT" => -3.0,
        "NST" => -3.5,
        "BST" | "CET" | "MET" | "WEST" => 1.0,
        "CEST" | "MEST" | "EET" | "SAST" => 2.0,
        "EEST" | "MSK" => 3.0,
        "IST" => 5.5,
        "SGT" | "HKT" | "AWST" => 8.0,
        "JST" | "KST" => 9.0,
        "ACST" => 9.5,
        "AEST" => 10.0,
        "AEDT" => 11.0,
        "NZST" => 12.0,
        "NZDT" => 13.0,
        _ => return None,
    };
    Some((hours * 3600.0) as i32)
}

/// Month names and their common abbreviations in the languages feeds use.
fn month(word: &str) -> Option<u32> {
    let word = word.trim_end_matches('.');
    let month = match word {
        "january" | "januar" | "jänner" | "janvier" | "janv" | "enero" | "ene" | "gennaio"
        | "gen" | "januari" | "janeiro" => 1,
        "february" | "februar" | "février" | "fevrier" | "févr" | "fevr" | "fév" | "febrero"
        | "febbraio" | "februari" | "fevereiro" | "fev" => 2,
        "march" | "märz" | "mär" | "maerz" | "mars" | "marzo" | "maart" | "mrt" | "março"
        | "marco" => 3,
        "april" | "avril" | "avr" | "abril" | "abr" | "aprile" => 4,
        "may" | "mai" | "mayo" | "maggio" | "mag" | "mei" | "maio" => 5,
        "june" | "juni" | "juin" | "junio" | "giugno" | "giu" | "junho" => 6,
        "july" | "juli" | "juillet" | "juil" | "julio" | "luglio" | "lug" | "julho" => 7,
        "august" | "août" | "aout" | "agosto" | "ago" | "augustus" => 8,
        "september" | "sept" | "septembre" | "septiembre" | "setiembre" | "settembre" | "set"
        | "setembro" => 9,
        "october" | "oktober" | "okt" | "octobre" | "octubre" | "ottobre" | "ott" | "outubro"
        | "out" => 10,
        "november" | "novembre" | "noviembre" | "novembro" => 11,
        "december" | "dezember" | "dez" | "décembre" | "decembre" | "déc" | "diciembre" | "dic"
        | "dicembre" | "dezembro" => 12,
        _ => return english_abbreviation(word),
    };
    Some(month)
}

fn english_abbreviation(word: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    MONTHS
        .iter()
        .position(|name| *name == word)
        .map(|at| at as u32 + 1)
}

#[derive(Default)]
struct Parts {
    year: Option<i32>,
    months: Vec<u32>,
    numbers: Vec<u32>,
    /// A numeric date (`03/30/2020`): (day, month, year).
    numeric: Option<(u32, u32, i32)>,
    time: Option<NaiveTime>,
    pm: Option<bool>,
    offset: Option<i32>,
}

/// Words and numbers in any order.
fn lenient(text: &str) -> Option<DateTime<Utc>> {
    let lower = text.to_lowercase();
    // A parenthesised zone name closes the date (`(Coordinated Universal Time)`).
    let lower = lower.split('(').next().unwrap_or_default();
    let mut parts = Parts::default();
    for token in lower.split(|c: char| c.is_whitespace() || c == ',') {
        read_token(token, &mut parts);
    }
    let (day, month, year) = match parts.numeric {
        Some(date) => date,
        None => {
            // Of several month names, the last: `mar., 01 déc.` is a Tuesday in December.
            let month = parts.months.last().copied().or_else(|| {
                // `11 04 2020`: day, then month.
                (parts.numbers.len() >= 2).then(|| parts.numbers.remove(1))
            })?;
            let day = parts.numbers.first().copied().unwrap_or(1);
            (day, month, parts.year?)
        }
    };
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    let mut time = parts.time.unwrap_or(NaiveTime::MIN);
    if let Some(pm) = parts.pm {
        use chrono::Timelike;
        let hour = time.hour() % 12 + if pm { 12 } else { 0 };
        time = time.with_hour(hour)?;
    }
    at(date, time, parts.offset.unwrap_or(0))
}

fn read_token(token: &str, parts: &mut Parts) {
    if token.is_empty() || token.chars().all(|c| matches!(c, '-' | '–' | '—')) {
        return;
    }
    match token {
        "am" | "a.m." | "a.m" => return parts.pm = Some(false),
        "pm" | "p.m." | "p.m" => return parts.pm = Some(true),
        _ => {}
    }
    if token.contains(':') && token.starts_with(|c: char| c.is_ascii_digit()) {
        // `3:09pm`
        let (clock_text, meridiem) = match token
            .strip_suffix("pm")
            .or_else(|| token.strip_suffix("p.m."))
        {
            Some(clock_text) => (clock_text, Some(true)),
            None => match token
                .strip_suffix("am")
                .or_else(|| token.strip_suffix("a.m."))
            {
                Some(clock_text) => (clock_text, Some(false)),
                None => (token, None),
            },
        };
        if let Some(time) = clock(clock_text) {
            parts.time = Some(time);
            if meridiem.is_some() {
                parts.pm = meridiem;
            }
        }
        return;
    }
    if token.starts_with(['+', '-']) || token.starts_with("gmt") || token.starts_with("utc") {
        if let Some(offset) = zone_offset(token) {
            parts.offset = Some(offset);
        }
        return;
    }
    if let Some(date) = numeric_date(token).or_else(|| dashed_date(token)) {
        parts.numeric = Some(date);
        return;
    }
    if let Some(month) = month(token) {
        parts.months.push(month);
        return;
    }
    let digits = token
        .trim_end_matches('.')
        .trim_end_matches(['s', 't', 'n', 'd', 'r', 'h']);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        match (digits.len(), digits.parse::<u32>()) {
            (4, Ok(year)) => parts.year = Some(year as i32),
            (1 | 2, Ok(number)) => parts.numbers.push(number),
            _ => {}
        }
        return;
    }
    if parts.offset.is_none()
        && token.chars().all(|c| c.is_ascii_alphabetic())
        && let Some(offset) = zone_offset(token)
    {
        parts.offset = Some(offset);
    }
}

/// Two-digit years as 20xx (before 70) or 19xx.
fn full_year(year: u32) -> i32 {
    match year {
        0..=69 => 2000 + year as i32,
        70..=99 => 1900 + year as i32,
        _ => year as i32,
    }
}

/// RFC 850's `05-mar-24` (day, month name, year).
fn dashed_date(token: &str) -> Option<(u32, u32, i32)> {
    let mut fields = token.split('-');
    let (day, name, year) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() {
        return None;
    }
    Some((
        day.parse().ok()?,
        month(name)?,
        full_year(year.parse().ok()?),
    ))
}

/// `mm/dd/yyyy` (or `dd/mm/yyyy` when the first part cannot be a month,
/// `yyyy/mm/dd` when it can only be a year),
/// `dd.mm.yy`, two-digit years as 20xx (before 70) or 19xx.
fn numeric_date(token: &str) -> Option<(u32, u32, i32)> {
    let separator = if token.contains('/') {
        '/'
    } else if token.matches('.').count() == 2 && !token.ends_with('.') {
        '.'
    } else {
        return None;
    };
    let fields: Vec<u32> = token
        .split(separator)
        .map(|part| part.parse().ok())
        .collect::<Option<_>>()?;
    let [a, b, c] = fields[..] else { return None };
    // `2024/03/05`: the year first, then month and day.
    if a > 31 {
        return Some((c, b, a as i32));
    }
    let year = full_year(c);
    let month_first = if separator == '/' { a <= 12 } else { b > 12 };
    Some(if month_first {
        (b, a, year)
    } else {
        (a, b, year)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn exact_instants() {
        for (text, expected) in [
            ("2017-12-22T22:09:49+00:00", "2017-12-22T22:09:49Z"),
            ("Tue, 03 Jun 2003 09:39:21 GMT", "2003-06-03T09:39:21Z"),
            ("Wed, 26 Dec 2018 10:00:54 PST", "2018-12-26T18:00:54Z"),
            ("Wed, 10 Feb 2021 22:46:00 EST", "2021-02-11T03:46:00Z"),
            ("Sun, 28 Oct 2018 13:48:00 +0100", "2018-10-28T12:48:00Z"),
            ("2018-10-23 04:07:42 +00:00", "2018-10-23T04:07:42Z"),
            ("2018-12-12T12:12", "2018-12-12T12:12:00Z"),
            ("2020-11-08T16:20:00-05:00Z", "2020-11-08T21:20:00Z"),
            (
                "Thu, 29 Oct 2020 07:36:03 GMT-07:00",
                "2020-10-29T14:36:03Z",
            ),
            ("Sun, 17 Dec 2017 1:55 PM EST", "2017-12-17T18:55:00Z"),
            ("Nov. 16, 2020, 10:57 a.m.", "2020-11-16T10:57:00Z"),
            ("Jan. 4, 2016, 12:37 p.m.", "2016-01-04T12:37:00Z"),
            ("Friday, December 22, 2017 - 3:09pm", "2017-12-22T15:09:00Z"),
            ("1520932969", "2018-03-13T09:22:49Z"),
            ("Do, 29 Mär 2018 00:00:00 +0200", "2018-03-28T22:00:00Z"),
            ("mar., 01 déc. 2020 16:11:02 +0000", "2020-12-01T16:11:02Z"),
            ("Sat, 11 04 2020 08:51:49 +0100", "2020-04-11T07:51:49Z"),
            ("09/15/2014 4:20 pm PST", "2014-09-16T00:20:00Z"),
            ("Fri, 26/06/2020", "2020-06-26T00:00:00Z"),
            ("30.10.23", "2023-10-30T00:00:00Z"),
            ("Nov. 2020", "2020-11-01T00:00:00Z"),
            (
                "Thu Nov 12 2020 17:00:00 GMT+0000 (Coordinated Universal Time)",
                "2020-11-12T17:00:00Z",
            ),
            ("2023-05-29 00:00:00+15:00", "2023-05-29T00:00:00Z"),
            ("Tuesday, 05-Mar-24 14:30:00 GMT", "2024-03-05T14:30:00Z"),
            ("2024/03/05 14:30:00", "2024-03-05T14:30:00Z"),
            ("2024.03.05", "2024-03-05T00:00:00Z"),
        ] {
            assert_eq!(parse(text), Some(utc(expected)), "{text}");
        }
    }

    /// Miniflux's date-parser test strings: each is read as the day it names.
    #[test]
    fn the_real_world_strings_name_their_day() {
        for (text, day) in [
            ("9 Dec 2016 12:00 GMT", "2016-12-09"),
            ("Friday, December 8, 2017 - 3:07pm", "2017-12-08"),
            ("Thu, 25 Feb 2016 00:00:00 Europe/Brussels", "2016-02-25"),
            ("Mon, 09 Apr 2018, 16:04", "2018-04-09"),
            ("Di, 23 Jan 2018 00:00:00 +0100", "2018-01-22"),
            ("mer, 9 avr 2018 00:00:00 +0200", "2018-04-08"),
            ("Tue 16 Feb 2016, 23:16:00 EDT", "2016-02-17"),
            ("Tue, 16 Feb 2016 23:16:00 EDT", "2016-02-17"),
            ("Tue, Feb 16 2016 23:16:00 EDT", "2016-02-17"),
            ("March 30 2020 07:02:38 PM", "2020-03-30"),
            ("Mon, 30 Mar 2020 19:53 +0000", "2020-03-30"),
            ("Mon, 03/30/2020 - 19:19", "2020-03-30"),
            ("Friday 06 November 2020", "2020-11-06"),
            ("Mon, November 16, 2020, 11:12 PM EST", "2020-11-17"),
            ("Lundi, 16. Novembre 2020 - 15:54", "2020-11-16"),
            ("Mon, 16th Nov 2020 13:16:28 GMT", "2020-11-16"),
            ("ven., 03 juil. 2020 15:09:58 +0000", "2020-07-03"),
            ("jeu., 02 avril 2020 00:00:00 +0200", "2020-04-01"),
            ("5 August, 2019", "2019-08-05"),
            ("Thurs, 15 Oct 2020 00:00:39 +0000", "2020-10-15"),
            ("Thur, 19 Nov 2020 00:00:39 +0000", "2020-11-19"),
            ("26 Sep 2022 GMT", "2022-09-26"),
            ("Thu, June 22, 2023 at 01:11 PM EDT", "2023-06-22"),
            ("Apr 16, 2023 08:01 GMT", "2023-04-16"),
            ("Jun 23, 2023 19:00 GMT", "2023-06-23"),
            ("Fri, 23rd Jun 2023 09:32:20 GMT", "2023-06-23"),
            ("Sat, Oct 28 2023 08:28:28 PM", "2023-10-28"),
            ("Monday, October 6, 2023 - 16:29\n", "2023-10-06"),
            ("10/30/23 21:55:58", "2023-10-30"),
            (
                "Fri, 31 Mar 2023 20:19:00 America/Los_Angeles",
                "2023-03-31",
            ),
            ("2023-05-29 00:00:00-13:00", "2023-05-29"),
        ] {
            let parsed = parse(text).unwrap_or_else(|| panic!("{text:?} is not read"));
            assert_eq!(parsed.date_naive().to_string(), day, "{text:?}");
        }
    }

    #[test]
    fn nonsense_is_undated() {
        for text in [
            "",
            "  ",
            "invalid",
            "############# EST",
            "Wed, 30 Nov -0001 00:00:00 +0000",
            "2024-13-45",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}
