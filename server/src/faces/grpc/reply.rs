//! The answers of the gRPC request service: a success with its fields, a failure, a
//! refused identity or permission, as Nacos shapes them.

use serde_json::{json, Value};

use super::config;
use super::proto::Payload;

/// A success of type `kind` with `fields`.
pub fn respond(kind: &str, mut fields: Value) -> Payload {
    fields["resultCode"] = json!(200);
    fields["errorCode"] = json!(0);
    fields["success"] = json!(true);
    Payload::new(kind, &fields)
}

/// What a naming request answers.
pub enum Answer {
    /// The reply's fields.
    Fields(Value),
    /// A `serviceInfo`, serialized on its own (a plain list is copied from the
    /// service's cached bytes rather than rebuilt as a `Value`), with `"message":
    /// "success"` for a subscription.
    ServiceInfo { subscribed: bool, info: Vec<u8> },
}

/// The reply of type `kind` carrying `answer`.
pub fn respond_answer(kind: &str, answer: Answer) -> Payload {
    match answer {
        Answer::Fields(fields) => respond(kind, fields),
        Answer::ServiceInfo { subscribed, info } => {
            let mut body = Vec::with_capacity(info.len() + 96);
            body.extend_from_slice(br#"{"resultCode":200,"errorCode":0,"success":true,"#);
            if subscribed {
                body.extend_from_slice(br#""message":"success","#);
            }
            body.extend_from_slice(br#""serviceInfo":"#);
            body.extend_from_slice(&info);
            body.push(b'}');
            Payload::from_json(kind, body)
        }
    }
}

pub fn failure(kind: &str, code: u16, message: &str) -> Payload {
    Payload::new(
        kind,
        &json!({ "resultCode": 500, "errorCode": code, "message": message, "success": false }),
    )
}

/// A refused identity or permission, as Nacos answers it: the reply type with errorCode
/// 403. A service list's reply carries its (empty) fields, which clients that validate
/// the reply type require before they look at the code (nacos-sdk-python 3.x).
pub fn refusal(reply_type: &str, message: &str) -> Payload {
    let mut body =
        json!({ "resultCode": 500, "errorCode": 403, "message": message, "success": false });
    if reply_type == "ServiceListResponse" {
        body["count"] = json!(0);
        body["serviceNames"] = json!([]);
    }
    config::complete_reply(reply_type, &mut body);
    Payload::new(reply_type, &body)
}
