use std::io::Read;

use mediatype::{MediaTypeBuf, names};

use crate::model::{Category, Content, Entry, Feed, FeedType, Image, Link, Person, Text};
use crate::parser::util::if_some_then;
use crate::parser::{ParseFeedError, ParseFeedResult, Parser};

#[cfg(test)]
mod tests;

/// Parses a JSON feed into our model
pub(crate) fn parse<R: Read>(parser: &Parser, stream: R) -> ParseFeedResult<Feed> {
    let parsed = serde_json::from_reader(stream);
    if let Ok(json_feed) = parsed {
        convert(parser, json_feed)
    } else {
        // Unable to parse the JSON
        Err(ParseFeedError::JsonSerde(parsed.err().unwrap()))
    }
}

// Convert the JSON Feed into our standard model
fn convert(parser: &Parser, jf: JsonFeed) -> ParseFeedResult<Feed> {
    let mut feed = Feed::new(FeedType::JSON);

    // If the version exists, it should be something we support
    // Trellis patch: the http:// spelling of the version URL is accepted too.
    if !jf.version.starts_with("https://jsonfeed.org/version/1") && !jf.version.starts_with("http://jsonfeed.org/version/1") {
        return ParseFeedResult::Err(ParseFeedError::JsonUnsupportedVersion(jf.version));
    }

    // Convert feed level fields
    feed.title = Some(Text::new(jf.title));

    if_some_then(jf.home_page_url, |uri| feed.links.push(Link::new(uri, None)));

    if_some_then(jf.feed_url, |uri| feed.links.push(Link::new(uri, None)));

    if_some_then(jf.description, |text| feed.description = Some(Text::new(text)));

    if_some_then(jf.icon, |uri| feed.logo = Some(Image::new(uri)));

    if_some_then(jf.language, |language| feed.language = Some(language));

    if_some_then(jf.favicon, |uri| feed.icon = Some(Image::new(uri)));

    handle_authors(&mut feed.authors, &jf.author, &jf.authors);

    // Convert items within the JSON feed
    jf.items.unwrap_or_default().into_iter().for_each(|ji| {
        feed.entries.push(handle_item(parser, ji));
    });

    // Per the spec, any items without an author inherit the feed
    if !feed.authors.is_empty() {
        feed.entries.iter_mut().for_each(|entry| {
            if entry.authors.is_empty() {
                entry.authors.append(&mut feed.authors.clone());
            }
        });
    }

    Ok(feed)
}

fn accumulate_author(authors: &mut Vec<Person>, ja: &JsonAuthor) {
    // Only add if we haven't already seen this person
    if let Some(name) = &ja.name {
        if !authors.iter().any(|a| a.name.is_some() && a.name.as_ref().unwrap() == name) {
            let mut person = Person::parse(name).role("author");
            person.uri.clone_from(&ja.url);

            authors.push(person);
        }
    }
}

// Handles an attachment
fn handle_attachment(attachment: JsonAttachment) -> Link {
    let mut link = Link::new(&attachment.url, None);

    // Trellis patch: an attachment is an enclosure (Atom's rel), so it is
    // told apart from the item's `url` and `external_url` links.
    link.rel = Some(String::from("enclosure"));
    link.media_type = attachment.mime_type;
    link.title = attachment.title;
    link.length = attachment.size_in_bytes;

    link
}

// Converts author / authors objects into our model
fn handle_authors(accumulated: &mut Vec<Person>, author: &Option<JsonAuthor>, authors: &Option<Vec<JsonAuthor>>) {
    if let Some(ja) = author {
        accumulate_author(accumulated, ja);
    }

    if let Some(jas) = authors {
        for ja in jas {
            accumulate_author(accumulated, ja);
        }
    }
}

// Handles HTML or plain text content
fn handle_content(content: Option<String>, content_type: MediaTypeBuf) -> Option<Content> {
    content.map(|body| Content {
        length: Some(body.len() as u64),
        body: Some(body.trim().into()),
        content_type,
        ..Default::default()
    })
}

// Converts a JSON feed item into our model
fn handle_item(parser: &Parser, ji: JsonItem) -> Entry {
    let mut entry = Entry {
        id: ji.id.unwrap_or("".into()),
        ..Default::default()
    };

    if_some_then(ji.url, |uri| entry.links.push(Link::new(uri, None)));

    if_some_then(ji.external_url, |uri| entry.links.push(Link::new(uri, None)));

    if_some_then(ji.title, |text| entry.title = Some(Text::new(text)));

    // Content HTML, content text and summary are mapped across to our model with the preference toward HTML and explicit summary fields
    entry.content = handle_content(ji.content_html, MediaTypeBuf::new(names::TEXT, names::HTML));
    entry.summary = ji.summary.map(Text::new);
    if let Some(content_text) = handle_content(ji.content_text, MediaTypeBuf::new(names::TEXT, names::PLAIN)) {
        // If we don't have HTML content, use the text content as the entry content
        // otherwise, if the summary was not provided, we push the text there

        if entry.content.is_none() {
            entry.content = Some(content_text);
        } else if entry.summary.is_none() {
            entry.summary = content_text.body.map(Text::new);
        }
    }

    if_some_then(ji.date_published, |published| entry.published = parser.parse_timestamp(&published));

    if_some_then(ji.date_modified, |modified| entry.updated = parser.parse_timestamp(&modified));

    handle_authors(&mut entry.authors, &ji.author, &ji.authors);

    if_some_then(ji.tags, |tags| {
        tags.into_iter().map(|t| Category::new(&t)).for_each(|category| entry.categories.push(category))
    });

    if_some_then(ji.attachments, |attachments| {
        attachments.into_iter().map(handle_attachment).for_each(|link| entry.links.push(link))
    });

    entry
}

// Trellis patch: what real JSON feeds get wrong is tolerated — a missing
// version or title, `authors` as one object, numbers for ids and strings, a
// missing attachment type; a field of the wrong shape is ignored.
fn lenient_string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    use serde::Deserialize;
    Ok(match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) => Some(text),
        serde_json::Value::Number(number) => Some(number.to_string()),
        _ => None,
    })
}

fn lenient_title<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    lenient_string(deserializer).map(Option::unwrap_or_default)
}

fn one_or_many<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(deserializer: D) -> Result<Option<Vec<T>>, D::Error> {
    use serde::Deserialize;
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(match value {
        serde_json::Value::Array(values) => Some(values.into_iter().filter_map(|value| serde_json::from_value(value).ok()).collect()),
        value => serde_json::from_value(value).ok().map(|one| vec![one]),
    })
}

fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(deserializer: D) -> Result<Option<T>, D::Error> {
    use serde::Deserialize;
    Ok(serde_json::from_value(serde_json::Value::deserialize(deserializer)?).ok())
}

#[derive(Debug, Deserialize)]
struct JsonFeed {
    #[serde(default = "default_version", deserialize_with = "lenient_title")]
    pub version: String,
    #[serde(default, deserialize_with = "lenient_title")]
    pub title: String,
    pub home_page_url: Option<String>,
    pub feed_url: Option<String>,
    pub language: Option<String>,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub favicon: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub author: Option<JsonAuthor>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub authors: Option<Vec<JsonAuthor>>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub items: Option<Vec<JsonItem>>,
}

fn default_version() -> String {
    "https://jsonfeed.org/version/1".into()
}

#[derive(Debug, Deserialize)]
struct JsonAttachment {
    url: String,
    #[serde(default, deserialize_with = "lenient_string")]
    mime_type: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    title: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    size_in_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct JsonAuthor {
    #[serde(default, deserialize_with = "lenient_string")]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct JsonItem {
    #[serde(default, deserialize_with = "lenient_string")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub url: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub external_url: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub title: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub content_html: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub content_text: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub summary: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub date_published: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub date_modified: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub author: Option<JsonAuthor>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub authors: Option<Vec<JsonAuthor>>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub attachments: Option<Vec<JsonAttachment>>,
}
