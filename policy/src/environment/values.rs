//! Secrets a variable's *value* shows, whatever its name says.
//!
//! - a URL whose user-info carries a password (`postgres://u:pw@host/db`), and in a
//!   `*_PROXY` variable also without a scheme (`u:pw@proxy:8080`, which curl reads as
//!   `http://u:pw@proxy:8080`);
//! - a `KEY=VALUE` setting whose key names a password, token or signature, wherever
//!   settings are written inside a value: a URL's query (`jdbc:mysql://h/db?password=`),
//!   an ADO or ODBC connection string (`Password=...;`, `Pwd=...;`), an option string
//!   (`JAVA_TOOL_OPTIONS=-Dhttp.proxyPassword=...`); Oracle's `thin:user/password@`;
//! - a webhook URL, whose path is the credential ([`WEBHOOKS`]: Slack, Discord, ...);
//! - a token a vendor marks with a prefix ([`TOKEN_PREFIXES`]: `ghp_`, `github_pat_`,
//!   `glpat-`, `xoxb-`, `sk-`, `AKIA`, ...), standing on its own in the value;
//! - an HTTP `Authorization:` header, or a PEM private key.

use std::ffi::OsStr;

/// Whether the variable `name=value` shows a secret in its value.
pub fn is_secret_value(name: &OsStr, value: &OsStr) -> bool {
    let text = value.to_string_lossy();
    url_with_password(&text)
        || schemeless_proxy_with_password(name, &text)
        || secret_setting(&text)
        || oracle_password(&text)
        || webhook(&text)
        || vendor_token(&text)
        || authorization_header(&text)
        || pem_private_key(&text)
}

/// Whether `text` carries an HTTP `Authorization:` (or `Proxy-Authorization:`) header,
/// as git's `http.extraheader` does with a token.
fn authorization_header(text: &str) -> bool {
    text.to_ascii_lowercase().contains("authorization:")
}

/// Whether `name` is a proxy variable (`HTTPS_PROXY`, `ftp_proxy`, `npm_config_proxy`)
/// and `value` gives a proxy with a password but no scheme (`u:pw@proxy:8080`), which
/// curl, wget and others read as `http://u:pw@proxy:8080`.
fn schemeless_proxy_with_password(name: &OsStr, value: &str) -> bool {
    let name = name.to_string_lossy().to_ascii_lowercase();
    if name.rsplit(['_', '-', '.']).next() != Some("proxy") {
        return false;
    }
    value.split([',', ';', ' ']).any(|entry| {
        !entry.contains("://") && url_with_password(&format!("http://{}", entry.trim()))
    })
}

/// Whether any `scheme://user:password@host` occurs in `text` (a list of URLs too).
fn url_with_password(text: &str) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        // The authority ends at the path, query, fragment, or a list separator.
        let end = after
            .find(['/', '?', '#', ',', ';', ' ', '\n'])
            .unwrap_or(after.len());
        let authority = &after[..end];
        if let Some(userinfo) = authority.rsplit_once('@').map(|(u, _)| u)
            && userinfo
                .split_once(':')
                .is_some_and(|(_, pw)| !pw.is_empty())
        {
            return true;
        }
        rest = after;
    }
    false
}

/// Whether `text` holds a `-----BEGIN ... PRIVATE KEY...-----` header.
fn pem_private_key(text: &str) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find("-----BEGIN ") {
        let after = &rest[at + "-----BEGIN ".len()..];
        let label = after.split("-----").next().unwrap_or("");
        if label.contains("PRIVATE") {
            return true;
        }
        rest = after;
    }
    false
}

/// Words of a setting's key (split on `_`, `-`, `.`, any case) that name a secret.
/// `pwd` is ODBC's and ADO's password key; `sig` and `signature` sign a URL (Azure SAS,
/// S3 presigned URLs).
pub const SETTING_WORDS: [&str; 5] = ["pwd", "pw", "pass", "sig", "signature"];

/// Stems that mark a setting's key anywhere inside a word (`proxyPassword`,
/// `client_secret`, `access_token`).
pub const SETTING_STEMS: [&str; 5] = ["password", "passwd", "passphrase", "secret", "token"];

/// Endings of a setting's key, with its separators removed (`api_key`, `apiKey`,
/// `aws.accessKey`).
pub const SETTING_KEY_ENDINGS: [&str; 3] = ["apikey", "accesskey", "privatekey"];

/// Whether `text` holds a setting `KEY=VALUE`, with a non-empty value, whose key names a
/// secret. Settings are separated by the query's `?` and `&`, a connection string's `;`,
/// a list's `,`, or blanks; an option's `-D` or dashes before the key are not part of it.
fn secret_setting(text: &str) -> bool {
    text.split(['?', '&', ';', ',', ' ', '\t', '\n'])
        .filter_map(|setting| setting.split_once('='))
        .any(|(key, value)| {
            let value = value.trim_matches(['\'', '"', '{', '}']);
            !value.is_empty() && secret_key(key)
        })
}

/// Whether `key` (as written in a setting) names a secret. A key is a name: letters,
/// digits, `_`, `-` and `.` (so `LS_COLORS` entries such as `*.key=01;31` are none).
fn secret_key(key: &str) -> bool {
    let key = key.trim_matches(['\'', '"']);
    let key = key
        .strip_prefix("-D")
        .unwrap_or(key)
        .trim_start_matches('-');
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return false;
    }
    let lower = key.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(['_', '-', '.'])
        .filter(|w| !w.is_empty())
        .collect();
    let compact: String = words.concat();
    words
        .iter()
        .any(|w| SETTING_WORDS.contains(w) || SETTING_STEMS.iter().any(|stem| w.contains(stem)))
        || SETTING_KEY_ENDINGS.iter().any(|end| compact.ends_with(end))
}

/// Whether `text` is an Oracle JDBC URL with a password: `jdbc:oracle:thin:user/pw@host`.
fn oracle_password(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let Some(at) = lower.find("jdbc:oracle:") else {
        return false;
    };
    let rest = &lower[at + "jdbc:oracle:".len()..];
    // The driver (`thin:`, `oci:`), then `user/password@`.
    let Some((_, login)) = rest.split_once(':') else {
        return false;
    };
    login
        .split_once('@')
        .and_then(|(credentials, _)| credentials.split_once('/'))
        .is_some_and(|(_, pw)| !pw.is_empty())
}

/// URLs whose path is itself the credential (anyone holding one can post as its owner):
/// a host and path prefix each, compared without case.
pub const WEBHOOKS: [&str; 8] = [
    "hooks.slack.com/services/",
    "hooks.slack.com/workflows/",
    "hooks.slack.com/triggers/",
    "discord.com/api/webhooks/",
    "discordapp.com/api/webhooks/",
    ".webhook.office.com/webhookb2/",
    "chat.googleapis.com/v1/spaces/",
    "api.telegram.org/bot",
];

/// Whether `text` holds a webhook URL from [`WEBHOOKS`] with something after the prefix.
///
/// Scanned byte by byte rather than searched for each hook: every command's environment
/// passes through here, in the launcher and again in the runner, and building a
/// substring searcher per hook and per variable was a measurable share of both.
fn webhook(text: &str) -> bool {
    let bytes = text.as_bytes();
    (0..bytes.len()).any(|at| {
        WEBHOOKS.iter().any(|hook| {
            let end = at + hook.len();
            bytes.len() > end
                && bytes[at..end].eq_ignore_ascii_case(hook.as_bytes())
                && bytes[end].is_ascii_alphanumeric()
        })
    })
}

/// What a token's body (after its prefix) is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// Upper-case letters and digits (AWS key ids).
    Upper,
    /// Letters and digits.
    Alnum,
    /// Letters, digits, `_` and `-`.
    Word,
}

/// Vendors' token prefixes: (prefix, what the body is made of, its least length, whether
/// it must hold a digit). A token counts only where it starts a word (the value's start,
/// or after a character that is not a letter or digit) and its body is that long: a
/// branch named `ghp_fix` or a locale `sk_SK` is no token. The digit requirement keeps
/// long words after a short prefix (`sk-learn-...`) out.
pub const TOKEN_PREFIXES: [(&str, Body, usize, bool); 22] = [
    ("ghp_", Body::Alnum, 30, false),
    ("gho_", Body::Alnum, 30, false),
    ("ghu_", Body::Alnum, 30, false),
    ("ghs_", Body::Alnum, 30, false),
    ("ghr_", Body::Alnum, 30, false),
    ("github_pat_", Body::Word, 40, false),
    ("glpat-", Body::Word, 20, false),
    ("xoxb-", Body::Word, 20, true),
    ("xoxp-", Body::Word, 20, true),
    ("xoxa-", Body::Word, 20, true),
    ("xoxr-", Body::Word, 20, true),
    ("xapp-", Body::Word, 20, true),
    ("sk-", Body::Word, 20, true),
    ("sk_live_", Body::Alnum, 20, false),
    ("sk_test_", Body::Alnum, 20, false),
    ("rk_live_", Body::Alnum, 20, false),
    ("AKIA", Body::Upper, 16, false),
    ("ASIA", Body::Upper, 16, false),
    ("AIza", Body::Word, 35, false),
    ("npm_", Body::Alnum, 36, false),
    ("pypi-", Body::Word, 50, false),
    ("hf_", Body::Alnum, 30, false),
];

/// Whether `text` holds a token with one of [`TOKEN_PREFIXES`]: at each position that
/// starts a word, each prefix is compared in place (a scan, not a substring search per
/// prefix; see [`webhook`]). Bytes, not characters: a token and its body are ASCII, and
/// the byte before a word's start is a letter or digit exactly when the character is.
fn vendor_token(text: &str) -> bool {
    let bytes = text.as_bytes();
    let starts_a_word = |at: usize| at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
    (0..bytes.len()).filter(|&at| starts_a_word(at)).any(|at| {
        TOKEN_PREFIXES.iter().any(|&(prefix, body, least, digit)| {
            if !bytes[at..].starts_with(prefix.as_bytes()) {
                return false;
            }
            let body_bytes: Vec<u8> = bytes[at + prefix.len()..]
                .iter()
                .copied()
                .take_while(|&c| match body {
                    Body::Upper => c.is_ascii_uppercase() || c.is_ascii_digit(),
                    Body::Alnum => c.is_ascii_alphanumeric(),
                    Body::Word => c.is_ascii_alphanumeric() || c == b'_' || c == b'-',
                })
                .collect();
            body_bytes.len() >= least && (!digit || body_bytes.iter().any(u8::is_ascii_digit))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The searches as first written (a substring search per prefix and per hook), kept
    /// as the reference the scans must agree with.
    fn webhook_by_search(text: &str) -> bool {
        let lower = text.to_ascii_lowercase();
        WEBHOOKS.iter().any(|hook| {
            lower.match_indices(hook).any(|(at, _)| {
                lower[at + hook.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric())
            })
        })
    }

    fn vendor_token_by_search(text: &str) -> bool {
        TOKEN_PREFIXES.iter().any(|&(prefix, body, least, digit)| {
            text.match_indices(prefix).any(|(at, _)| {
                let starts_a_word = text[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_ascii_alphanumeric());
                let body_chars: Vec<char> = text[at + prefix.len()..]
                    .chars()
                    .take_while(|&c| match body {
                        Body::Upper => c.is_ascii_uppercase() || c.is_ascii_digit(),
                        Body::Alnum => c.is_ascii_alphanumeric(),
                        Body::Word => c.is_ascii_alphanumeric() || c == '_' || c == '-',
                    })
                    .collect();
                starts_a_word
                    && body_chars.len() >= least
                    && (!digit || body_chars.iter().any(char::is_ascii_digit))
            })
        })
    }

    #[test]
    fn the_scans_answer_as_the_substring_searches_did() {
        let token = "0123456789abcdefghijABCDEFGHIJ0123456789abcdefghij0123";
        let mut corpus: Vec<String> = vec![
            String::new(),
            "/usr/local/bin:/usr/bin:/bin".into(),
            "ghp_fix".into(),
            "sk_SK.UTF-8".into(),
            "sk-learn-is-a-long-word-without-digits".into(),
            "AKIAAKIAAKIAAKIAAKIAAKIA".into(),
            "xAKIAIOSFODNN7EXAMPLE".into(),
            "é AKIAIOSFODNN7EXAMPLE".into(),
            "éAKIAIOSFODNN7EXAMPLE".into(),
            "HTTPS://HOOKS.SLACK.COM/SERVICES/T0/B0/X".into(),
            "hooks.slack.com/services/".into(),
            "hooks.slack.com/services/-".into(),
            "https://discord.com/api/webhooks/é".into(),
            "x.webhook.office.com/webhookb2/a".into(),
            "api.telegram.org/botA".into(),
        ];
        for &(prefix, ..) in &TOKEN_PREFIXES {
            for cut in [0, 10, 19, 20, 30, 35, 36, 40, 50, token.len()] {
                let body = &token[..cut.min(token.len())];
                corpus.push(format!("{prefix}{body}"));
                corpus.push(format!("x{prefix}{body}"));
                corpus.push(format!("a=1,{prefix}{body};é"));
                corpus.push(format!("{prefix}{}", body.to_ascii_uppercase()));
            }
        }
        for hook in WEBHOOKS {
            for after in ["", "a", "-", "é", "T0/B0"] {
                corpus.push(format!("https://{hook}{after}"));
                corpus.push(format!("https://{}{after}", hook.to_ascii_uppercase()));
            }
        }
        for text in &corpus {
            assert_eq!(vendor_token(text), vendor_token_by_search(text), "{text:?}");
            assert_eq!(webhook(text), webhook_by_search(text), "{text:?}");
        }
        // The corpus holds both answers of each.
        assert!(corpus.iter().any(|t| vendor_token(t)) && corpus.iter().any(|t| !vendor_token(t)));
        assert!(corpus.iter().any(|t| webhook(t)) && corpus.iter().any(|t| !webhook(t)));
    }
}
