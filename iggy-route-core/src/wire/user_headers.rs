//! User-header (and options) TLV blocks (§2).

use super::{Reader, WireError};

/// Check a user-headers block: `[kind:u8 != 0][len:u32 1..=255][bytes]` entries, an
/// even number of them (key, value pairs). Returns the number of pairs.
pub fn validate_user_headers(buf: &[u8]) -> Result<u32, WireError> {
    let mut r = Reader::new(buf);
    let mut entries: u32 = 0;
    while r.remaining() > 0 {
        let kind = r.u8()?;
        if kind == 0 {
            return Err(WireError::InvalidValue {
                field: "user header kind",
                value: 0,
            });
        }
        let len = r.u32()? as usize;
        if !(1..=255).contains(&len) {
            return Err(WireError::InvalidLength {
                field: "user header field",
                len,
            });
        }
        r.bytes(len)?;
        entries = entries.saturating_add(1);
    }
    if !entries.is_multiple_of(2) {
        return Err(WireError::InvalidLength {
            field: "user header entries",
            len: entries as usize,
        });
    }
    Ok(entries / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_headers_must_be_pairs_of_valid_entries() {
        let pair = [2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v'];
        assert_eq!(validate_user_headers(&pair), Ok(1));
        assert_eq!(validate_user_headers(&[]), Ok(0));
        assert!(validate_user_headers(&pair[..6]).is_err());
        assert!(validate_user_headers(&[0, 1, 0, 0, 0, b'k']).is_err());
        assert!(validate_user_headers(&[1, 2, 3]).is_err());
    }
}
