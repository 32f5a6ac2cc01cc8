//! A usage error (what clap refused) as the one `stockade: ` line every failure of
//! stockade prints, with the fix for the commonest one: a command given without `--`.

use std::ffi::OsString;

/// A usage error as the one `stockade: ` line every failure of stockade prints: clap's
/// message with its lines joined, the usage kept, the closing `--help` hint dropped.
pub fn usage_error_line(e: &clap::Error, args: &[OsString]) -> String {
    if let Some(line) = missing_dashes_line(e, args) {
        return line;
    }
    let rendered = e.render().to_string();
    let mut line = String::from("stockade:");
    for part in rendered.lines().map(str::trim) {
        if part.is_empty() || part.starts_with("For more information") {
            continue;
        }
        match part.strip_prefix("Usage: ") {
            Some(usage) => line.push_str(&format!("; usage: {usage}")),
            None => {
                line.push(' ');
                line.push_str(part.strip_prefix("error: ").unwrap_or(part));
            }
        }
    }
    line
}

/// `stockade run true`: a command given without `--` in front of it. clap calls the
/// word an unexpected argument; the useful answer is where it belongs.
fn missing_dashes_line(e: &clap::Error, args: &[OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(word)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    if word.starts_with('-') {
        return None;
    }
    // OsString: an argument that is not UTF-8 must not make this panic.
    let sub = args
        .iter()
        .skip(1)
        .find(|a| *a == "run" || *a == "confine")?;
    let sub = sub.to_string_lossy();
    Some(format!(
        "stockade: {word:?} is not an option of stockade {sub}: put the command after --, as in: stockade {sub} [OPTIONS] -- {word} ..."
    ))
}
