use std::io::BufRead;

use mediatype::{MediaTypeBuf, names};

use crate::model::LinkTarget::CommentsFeed;
use crate::model::{Category, Content, Entry, Feed, FeedType, Generator, Image, Link, Person, Text};
use crate::parser::util;
use crate::parser::util::if_some_then;
use crate::parser::ParseFeedResult;
use crate::parser::{Parser, common};
use crate::xml::{Element, NS};

#[cfg(test)]
mod tests;

/// Parses an Atom feed into our model
pub(crate) fn parse_feed<R: BufRead>(parser: &Parser, root: Element<R>) -> ParseFeedResult<Feed> {
    let mut feed = Feed::new(FeedType::Atom);

    // Extract top-level info
    feed.language = handle_language_attr(&root);

    for child in root.children() {
        let child = child?;
        match child.ns_and_tag() {
            (NS::Atom, "id") => if_some_then(child.child_as_text(), |id| feed.id = id),

            (NS::Atom, "title") => feed.title = handle_text(child)?,

            (NS::Atom, "updated") => if_some_then(child.child_as_text(), |text| feed.updated = parser.parse_timestamp(&text)),

            (NS::Atom, "author") => if_some_then(handle_person("author", child)?, |person| feed.authors.push(person)),

            (NS::Atom, "link") => if_some_then(handle_link(child), |link| feed.links.push(link)),

            (NS::Atom, "category") => if_some_then(handle_category(child), |category| feed.categories.push(category)),

            (NS::Atom, "contributor") => if_some_then(handle_person("contributor", child)?, |person| feed.contributors.push(person)),

            (NS::Atom, "generator") => feed.generator = handle_generator(child),

            (NS::Atom, "icon") => feed.icon = handle_image(child),

            (NS::Atom, "logo") => feed.logo = handle_image(child),

            (NS::Atom, "rights") => feed.rights = handle_text(child)?,

            (NS::Atom, "subtitle") => feed.description = handle_text(child)?,

            // Trellis patch: Atom 0.3's names.
            (NS::Atom, "tagline") if feed.description.is_none() => feed.description = handle_text(child)?,
            (NS::Atom, "modified") if feed.updated.is_none() => if_some_then(child.child_as_text(), |text| feed.updated = parser.parse_timestamp(&text)),

            (NS::Atom, "entry") => if_some_then(handle_entry(parser, child)?, |entry| feed.entries.push(entry)),

            // Nothing required for unknown elements
            _ => {}
        }
    }

    Ok(feed)
}

/// Parses an Atom entry into our model
///
/// Note that the entry is wrapped in an empty Feed to keep the API consistent
pub(crate) fn parse_entry<R: BufRead>(parser: &Parser, root: Element<R>) -> ParseFeedResult<Feed> {
    let mut feed = Feed::new(FeedType::Atom);

    if_some_then(handle_entry(parser, root)?, |entry| feed.entries.push(entry));

    Ok(feed)
}

// Handles "xml:base" as an attribute (e.g. in Atom feeds)
fn handle_base_attr<R: BufRead>(element: &Element<R>) -> Option<String> {
    element.attr_value("xml:base")
}

// Handles an Atom <category>
fn handle_category<R: BufRead>(element: Element<R>) -> Option<Category> {
    // Always need a term
    if let Some(term) = element.attr_value("term") {
        let mut category = Category::new(&term);

        for attr in element.attributes {
            match attr.name.as_str() {
                "scheme" => category.scheme = Some(attr.value.clone()),
                "label" => category.label = Some(attr.value.clone()),

                // Nothing required for unknown attributes
                _ => {}
            }
        }

        Some(category)
    } else {
        // A missing category isn't fatal
        None
    }
}

// Handles an Atom <content> element
//
// Trellis patch: an odd or missing type, a missing body or a body beside `src`
// degrade this one field (to text, or to nothing) instead of refusing the feed.
fn handle_content<R: BufRead>(element: Element<R>) -> ParseFeedResult<Option<Content>> {
    // Extract the content type so we can parse the body
    let content_type = element.attr_value("type");

    if let Some(src) = element.attr_value("src") {
        let mime = content_type
            .as_deref()
            .and_then(|ct| ct.parse::<MediaTypeBuf>().ok())
            .unwrap_or_else(|| MediaTypeBuf::new(names::TEXT, names::HTML));

        let content = Content {
            body: None,
            content_type: mime,
            src: Some(Link {
                href: src,
                target: None,
                rel: None,
                media_type: content_type,
                href_lang: None,
                title: None,
                length: None,
            }),
            ..Default::default()
        };

        return Ok(Some(content));
    }

    // Atom 0.3: base64-encoded bodies are not read.
    if element.attr_value("mode").as_deref() == Some("base64") {
        return Ok(None);
    }

    // from http://www.atomenabled.org/developers/syndication/#contentElement
    match content_type.as_deref().map(str::trim) {
        // Should be handled as a text element per "In the most common case, the type attribute is either text, html, xhtml, in which case the content element is defined identically to other text constructs"
        //
        // Trellis patch: a type that is no MIME type at all (`type="bogus"`) is
        // a text construct's type gone wrong, read as text like one.
        Some("text") | Some("html") | Some("xhtml") | Some("text/html") | Some("text/plain") | Some("application/xhtml+xml") | None => Ok(handle_text(element)?.map(|text| Content {
            body: Some(text.content),
            content_type: text.content_type,
            ..Default::default()
        })),
        Some(ct) if !ct.contains('/') => Ok(handle_text(element)?.map(|text| Content {
            body: Some(text.content),
            content_type: text.content_type,
            ..Default::default()
        })),

        // XML per "Otherwise, if the type attribute ends in +xml or /xml, then an xml document of this type is contained inline."
        Some(ct) if ct.ends_with("+xml") || ct.ends_with("/xml") => Ok(element.child_as_text_sloppy()?.map(|body| Content {
            body: Some(body),
            content_type: MediaTypeBuf::new(names::TEXT, names::XML),
            ..Default::default()
        })),

        // Other text is read as text; anything else (base64 by the spec) is skipped.
        Some(ct) if ct.starts_with("text/") => Ok(element.child_as_text().map(|body| Content {
            body: Some(body),
            content_type: ct.parse::<MediaTypeBuf>().unwrap_or_else(|_| MediaTypeBuf::new(names::TEXT, names::PLAIN)),
            ..Default::default()
        })),
        Some(_) => Ok(None),
    }
}

// Handles an Atom <entry>
fn handle_entry<R: BufRead>(parser: &Parser, element: Element<R>) -> ParseFeedResult<Option<Entry>> {
    // Note we have started a new MediaRSS entry scope
    parser.mediarss.entry_begin();

    // Parse the entry
    let mut entry = Entry::default();
    for child in element.children() {
        let child = child?;
        match child.ns_and_tag() {
            // Extract the fields from the spec
            (NS::Atom, "id") => if_some_then(child.child_as_text(), |id| entry.id = id),

            (NS::Atom, "title") => entry.title = handle_text(child)?,

            (NS::Atom, "updated") => if_some_then(child.child_as_text(), |text| entry.updated = parser.parse_timestamp(&text)),

            (NS::Atom, "author") => if_some_then(handle_person("author", child)?, |person| entry.authors.push(person)),

            (NS::Atom, "content") => {
                entry.base = handle_base_attr(&child);
                entry.language = handle_language_attr(&child);
                entry.content = handle_content(child)?;
            }

            (NS::Atom, "link") => if_some_then(handle_link(child), |link| entry.links.push(link)),

            (NS::Atom, "summary") => entry.summary = handle_text(child)?,

            (NS::Atom, "category") => if_some_then(handle_category(child), |category| entry.categories.push(category)),

            (NS::Atom, "contributor") => if_some_then(handle_person("contributor", child)?, |person| entry.contributors.push(person)),

            // Some feeds have "pubDate" instead of "published"
            (NS::Atom, "published") | (NS::Atom, "pubDate") => if_some_then(child.child_as_text(), |text| entry.published = parser.parse_timestamp(&text)),

            // Trellis patch: Atom 0.3's issued/created (published) and modified (updated).
            (NS::Atom, "issued") | (NS::Atom, "created") if entry.published.is_none() => {
                if_some_then(child.child_as_text(), |text| entry.published = parser.parse_timestamp(&text))
            }
            (NS::Atom, "modified") if entry.updated.is_none() => if_some_then(child.child_as_text(), |text| entry.updated = parser.parse_timestamp(&text)),

            (NS::Atom, "rights") => entry.rights = handle_text(child)?,

            // According to https://validator.w3.org/feed/docs/warning/CommentRSS.html we need to support both
            (NS::WellFormedWebComments, "commentRss") | (NS::WellFormedWebComments, "commentRSS") => {
                if_some_then(common::handle_link(Some(CommentsFeed), child), |link| entry.links.push(link))
            }

            // Handle MediaRSS elements
            (NS::MediaRSS, _) => parser.mediarss.handle_entry_mediarss_element(child)?,

            // Nothing required for unknown elements
            _ => {}
        }
    }

    // Handle completion of an entry, potentially emitting media objects if we've found them along the way
    parser.mediarss.entry_end(&mut entry);

    Ok(Some(entry))
}

// Handles an Atom <generator>
fn handle_generator<R: BufRead>(element: Element<R>) -> Option<Generator> {
    element.child_as_text().map(|content| {
        let mut generator = Generator::new(&content);

        for attr in element.attributes {
            match attr.name.as_str() {
                "uri" => generator.uri = Some(attr.value.clone()),
                "version" => generator.version = Some(attr.value.clone()),
                // Nothing required for unknown attributes
                _ => {}
            }
        }

        generator
    })
}

// Handles an Atom <icon> or <logo>
fn handle_image<R: BufRead>(element: Element<R>) -> Option<Image> {
    element
        .child_as_text()
        .map(|raw_uri| {
            util::parse_uri(&raw_uri, element.xml_base.as_ref())
                .map(|parsed| parsed.to_string())
                .unwrap_or(raw_uri)
        })
        .map(Image::new)
}

// Handles "xml:lang" as an attribute (e.g. in Atom feeds)
fn handle_language_attr<R: BufRead>(element: &Element<R>) -> Option<String> {
    element.attr_value("xml:lang")
}

// Handles an Atom <link>
pub(crate) fn handle_link<R: BufRead>(element: Element<R>) -> Option<Link> {
    // Always need an href
    element.attr_value("href").map(|href| {
        let mut link = Link::new(href, element.xml_base.as_ref());

        for attr in element.attributes {
            match attr.name.as_str() {
                "rel" => link.rel = Some(attr.value.clone()),
                "type" => link.media_type = Some(attr.value.clone()),
                "hreflang" => link.href_lang = Some(attr.value.clone()),
                "title" => link.title = Some(attr.value.clone()),
                "length" => link.length = attr.value.parse::<u64>().ok(),

                // Nothing required for unrecognised attributes
                _ => {}
            }
        }

        // Default "rel" to "alternate" if not set
        if link.rel.is_none() {
            link.rel = Some(String::from("alternate"));
        }

        link
    })
}

// Handles an Atom <author> or <contributor>
fn handle_person<R: BufRead>(role: &str, element: Element<R>) -> ParseFeedResult<Option<Person>> {
    let mut maybe_name = None;
    let mut maybe_uri = None;
    let mut maybe_email = None;
    for child in element.children() {
        let child = child?;
        let tag_name = child.name.as_str();
        let child_text = child.child_as_text();
        match (tag_name, child_text) {
            // Extract the fields from the spec
            ("name", Some(name)) => maybe_name = Some(name),
            ("uri", uri) => maybe_uri = uri,
            ("email", email) => maybe_email = email,

            // Nothing required for unknown elements
            _ => {}
        }
    }

    // Need either a name or an email
    let person = if maybe_name.is_some() || maybe_email.is_some() {
        let mut person = Person::empty();
        person.name = maybe_name;
        person.email = maybe_email;
        person.role = Some(role.into());
        person.uri = maybe_uri;
        Some(person)
    } else {
        None
    };

    Ok(person)
}

// Directly handles an Atom <title>, <summary>, <rights> or <subtitle> element
//
// Trellis patch: an unknown type is read as text, and an empty element is no
// text (`None`), instead of refusing the whole feed.
pub(crate) fn handle_text<R: BufRead>(element: Element<R>) -> ParseFeedResult<Option<Text>> {
    // Find type, defaulting to "text" if not present
    let type_attr = element.attributes.iter().find(|a| &a.name == "type").map_or("text", |a| a.value.as_str()).trim().to_ascii_lowercase();

    let (body, content_type) = match type_attr.as_str() {
        "html" | "text/html" => (element.child_as_text_sloppy()?, MediaTypeBuf::new(names::TEXT, names::HTML)),
        "xhtml" | "application/xhtml+xml" => (element.children_as_xhtml()?, MediaTypeBuf::new(names::APPLICATION, names::XHTML)),
        _ => (element.child_as_text_sloppy()?, MediaTypeBuf::new(names::TEXT, names::PLAIN)),
    };
    Ok(body.map(|body| {
        let mut text = Text::new(body);
        text.content_type = content_type;
        text
    }))
}
