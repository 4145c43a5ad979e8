//! Durations as the SDK 0.11.0 spells them in a connection string (`IggyDuration::from_str`
//! in `iggy_common`, which lowercases the text and hands it to `humantime` 2.4), read
//! without either crate so the core keeps its few dependencies.

use std::iter::Peekable;
use std::str::Chars;
use std::time::Duration;

/// A duration spelled as the SDK spells one: `0`, `unlimited`, `disabled` and `none` are zero;
/// anything else is a sum of terms, each a number with an optional fraction and a unit
/// (`5s`, `1.5h`, `1h 30m`, `2min5s`). Whitespace may sit anywhere but inside a unit. The
/// arithmetic is the SDK's: 64-bit integers, and a fraction must come out in whole
/// nanoseconds (for hours and longer units, whole seconds; for nanoseconds, not at all).
pub(super) fn sdk_duration(text: &str) -> Option<Duration> {
    let text = text.to_lowercase();
    if matches!(text.as_str(), "0" | "unlimited" | "disabled" | "none") {
        return Some(Duration::ZERO);
    }
    let mut reader = text.chars().peekable();
    let mut total = Duration::ZERO;
    let mut terms = 0_usize;
    loop {
        skip_whitespace(&mut reader);
        match reader.peek() {
            Some(c) if c.is_ascii_digit() => {}
            None if terms > 0 => return Some(total),
            // Empty, or a term that does not start with a digit.
            Some(_) | None => return None,
        }
        total = total.checked_add(read_term(&mut reader)?)?;
        terms += 1;
    }
}

/// One term: digits (whitespace between them is skipped), an optional `.` and fraction
/// digits, then the unit's letters.
fn read_term(reader: &mut Peekable<Chars<'_>>) -> Option<Duration> {
    let mut whole: u64 = 0;
    let mut fraction = None;
    while let Some(&c) = reader.peek() {
        if let Some(digit) = c.to_digit(10) {
            whole = whole.checked_mul(10)?.checked_add(u64::from(digit))?;
        } else if c == '.' {
            reader.next();
            fraction = Some(read_fraction(reader)?);
            break;
        } else if is_unit_letter(c) {
            break;
        } else if !c.is_whitespace() {
            return None;
        }
        reader.next();
    }
    let mut unit = String::new();
    while let Some(c) = reader.next_if(|&c| is_unit_letter(c)) {
        unit.push(c);
    }
    let unit = Unit::from_name(&unit)?;
    let whole = unit.whole.times(whole)?;
    match fraction {
        None => Some(whole),
        Some(fraction) => whole.checked_add(unit.fraction?.share(fraction)?),
    }
}

/// The digits after a `.`, up to the unit's first letter: at least one digit, and the
/// numerator and the power of ten below it each within 64 bits, as in the SDK.
fn read_fraction(reader: &mut Peekable<Chars<'_>>) -> Option<Fraction> {
    let mut fraction = Fraction {
        numerator: 0,
        denominator: 1,
    };
    loop {
        let c = *reader.peek()?;
        if let Some(digit) = c.to_digit(10) {
            fraction.numerator = fraction
                .numerator
                .checked_mul(10)?
                .checked_add(u64::from(digit))?;
            fraction.denominator = fraction.denominator.checked_mul(10)?;
        } else if is_unit_letter(c) {
            return (fraction.denominator > 1).then_some(fraction);
        } else if !c.is_whitespace() {
            return None;
        }
        reader.next();
    }
}

fn skip_whitespace(reader: &mut Peekable<Chars<'_>>) {
    while reader.next_if(|c| c.is_whitespace()).is_some() {}
}

/// The letters `humantime` reads as part of a unit.
fn is_unit_letter(c: char) -> bool {
    c.is_ascii_alphabetic() || c == 'µ'
}

#[derive(Debug, Clone, Copy)]
struct Fraction {
    numerator: u64,
    denominator: u64,
}

/// A count of nanoseconds or of seconds per unit.
#[derive(Debug, Clone, Copy)]
enum Scale {
    Nanos(u64),
    Seconds(u64),
}

impl Scale {
    fn times(self, count: u64) -> Option<Duration> {
        match self {
            Scale::Nanos(per_unit) => Some(Duration::from_nanos(count.checked_mul(per_unit)?)),
            Scale::Seconds(per_unit) => Some(Duration::from_secs(count.checked_mul(per_unit)?)),
        }
    }

    /// `fraction` of one unit, refused unless it is a whole number of this scale's steps.
    fn share(self, fraction: Fraction) -> Option<Duration> {
        let per_unit = match self {
            Scale::Nanos(per_unit) | Scale::Seconds(per_unit) => per_unit,
        };
        let scaled = fraction.numerator.checked_mul(per_unit)?;
        if scaled % fraction.denominator != 0 {
            return None;
        }
        let steps = scaled / fraction.denominator;
        match self {
            Scale::Nanos(_) => Some(Duration::from_nanos(steps)),
            Scale::Seconds(_) => Some(Duration::from_secs(steps)),
        }
    }
}

/// How a unit scales the whole part of a term and its fraction (`None`: no fraction).
#[derive(Debug, Clone, Copy)]
struct Unit {
    whole: Scale,
    fraction: Option<Scale>,
}

impl Unit {
    /// `humantime`'s unit names. Its `M` for months cannot occur: the text is lowercased
    /// first, which makes `1M` one minute, as in the SDK.
    fn from_name(name: &str) -> Option<Unit> {
        const NANOS_PER_SECOND: u64 = 1_000_000_000;
        let sub_second = |nanos| Unit {
            whole: Scale::Nanos(nanos),
            fraction: Some(Scale::Nanos(nanos)),
        };
        // Seconds and minutes keep a fraction to the nanosecond, longer units to the second.
        let seconds = |seconds: u64, fraction| Unit {
            whole: Scale::Seconds(seconds),
            fraction: Some(fraction),
        };
        let long = |seconds| Unit {
            whole: Scale::Seconds(seconds),
            fraction: Some(Scale::Seconds(seconds)),
        };
        Some(match name {
            "nanos" | "nsec" | "ns" => Unit {
                whole: Scale::Nanos(1),
                fraction: None,
            },
            "usec" | "us" | "µs" => sub_second(1_000),
            "millis" | "msec" | "ms" => sub_second(1_000_000),
            "seconds" | "second" | "secs" | "sec" | "s" => {
                seconds(1, Scale::Nanos(NANOS_PER_SECOND))
            }
            "minutes" | "minute" | "mins" | "min" | "m" => {
                seconds(60, Scale::Nanos(60 * NANOS_PER_SECOND))
            }
            "hours" | "hour" | "hrs" | "hr" | "h" => long(3_600),
            "days" | "day" | "d" => long(86_400),
            "weeks" | "week" | "wks" | "wk" | "w" => long(604_800),
            // humantime's month and year: 30.44 and 365.25 days.
            "months" | "month" => long(2_630_016),
            "years" | "year" | "yrs" | "yr" | "y" => long(31_557_600),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_the_sdk_grammar() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        let cases = [
            ("0", Some(Duration::ZERO)),
            ("UNLIMITED", Some(Duration::ZERO)),
            ("none", Some(Duration::ZERO)),
            ("disabled", Some(Duration::ZERO)),
            ("0s", Some(Duration::ZERO)),
            ("5s", Some(s(5))),
            ("5S", Some(s(5))),
            ("100ms", Some(ms(100))),
            ("1.5s", Some(ms(1_500))),
            ("1. 5 s", Some(ms(1_500))),
            ("1 0s", Some(s(10))),
            ("  2min5s ", Some(s(125))),
            ("1h 30m", Some(s(5_400))),
            ("1M", Some(s(60))),
            ("1.5h", Some(s(5_400))),
            ("1wk", Some(s(604_800))),
            ("1\u{212a}", None),
            ("1w\u{212a}", Some(s(604_800))),
            ("3µs", Some(Duration::from_micros(3))),
            ("1.5ns", None),
            ("1.0ns", None),
            ("0.0001h", None),
            ("0.5ns", None),
            ("0.000000001s", Some(Duration::from_nanos(1))),
            ("0.0000000001s", None),
            ("1.00000000000000000000s", None),
            ("18446744073709551616ns", None),
            ("", None),
            ("  ", None),
            ("00", None),
            ("5", None),
            ("s", None),
            (".5s", None),
            ("1.s", None),
            ("1..5s", None),
            ("-1s", None),
            ("+1s", None),
            ("5s s", None),
            ("5 sec onds", None),
            ("5fortnights", None),
            ("1s,2s", None),
        ];
        for (text, expected) in cases {
            assert_eq!(sdk_duration(text), expected, "{text:?}");
        }
    }
}
