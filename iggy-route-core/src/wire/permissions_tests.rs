//! Tests of the permissions layout (`permissions.rs`).

#![allow(clippy::unwrap_used)]

use super::*;

fn sample() -> Permissions {
    Permissions {
        global: GlobalPermissions {
            read_users: true,
            poll_messages: true,
            ..GlobalPermissions::default()
        },
        streams: vec![
            StreamPermissions {
                stream_id: 1,
                send_messages: true,
                topics: vec![
                    TopicPermissions {
                        topic_id: 10,
                        read_topic: true,
                        ..TopicPermissions::default()
                    },
                    TopicPermissions {
                        topic_id: 20,
                        manage_topic: true,
                        ..TopicPermissions::default()
                    },
                ],
                ..StreamPermissions::default()
            },
            StreamPermissions {
                stream_id: 2,
                manage_stream: true,
                ..StreamPermissions::default()
            },
        ],
    }
}

fn encode(permissions: &Permissions) -> BytesMut {
    let mut out = BytesMut::new();
    permissions.encode(&mut out);
    out
}

#[test]
fn round_trip_and_layout() {
    let permissions = sample();
    let out = encode(&permissions);
    assert_eq!(out.len(), permissions.encoded_len());
    // 10 global flags, has_streams, stream 1 id, 6 flags, has_topics.
    assert_eq!(&out[..11], &[0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1]);
    assert_eq!(&out[11..15], &1u32.to_le_bytes());
    assert_eq!(out[21], 1);
    let mut r = Reader::new(&out);
    assert_eq!(Permissions::read(&mut r).unwrap(), permissions);
    r.finish("permissions").unwrap();

    let all = encode(&Permissions::all());
    assert_eq!(&all[..], &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
}

#[test]
fn every_truncation_fails_and_nonzero_flags_read_as_true() {
    let out = encode(&sample());
    for cut in 0..out.len() {
        assert!(Permissions::read(&mut Reader::new(&out[..cut])).is_err());
    }
    let mut odd = encode(&Permissions::default()).to_vec();
    odd[0] = 7;
    let read = Permissions::read(&mut Reader::new(&odd)).unwrap();
    assert!(read.global.manage_servers);
}

#[test]
fn prefixed_form_must_fill_its_length_exactly() {
    let permissions = sample();
    let mut out = BytesMut::new();
    permissions.encode_prefixed(&mut out);
    let mut r = Reader::new(&out);
    assert_eq!(Permissions::read_prefixed(&mut r).unwrap(), permissions);
    assert_eq!(r.remaining(), 0);
    // One byte too many inside the announced length.
    let mut long = BytesMut::new();
    long.put_u32_le(super::super::len_u32(permissions.encoded_len() + 1));
    permissions.encode(&mut long);
    long.put_u8(0);
    assert!(Permissions::read_prefixed(&mut Reader::new(&long)).is_err());
    // A length far beyond the input fails without allocating it.
    let huge = [0xff, 0xff, 0xff, 0xff, 0];
    assert!(matches!(
        Permissions::read_prefixed(&mut Reader::new(&huge)),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn update_permissions_request_round_trips() {
    for permissions in [None, Some(sample())] {
        let request = UpdatePermissionsRequest {
            user: 3.into(),
            permissions,
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        assert_eq!(out.len(), request.encoded_len());
        assert_eq!(UpdatePermissionsRequest::decode(&out).unwrap(), request);
        for cut in 0..out.len() {
            assert!(UpdatePermissionsRequest::decode(&out[..cut]).is_err());
        }
    }
    assert!(matches!(
        UpdatePermissionsRequest::decode(&[1, 4, 3, 0, 0, 0, 2]),
        Err(WireError::InvalidValue { .. })
    ));
}
