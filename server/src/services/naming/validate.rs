//! The one check of an instance registration, whichever face it came through: HTTP v1
//! and v2 parameters, a gRPC instance, or a sync task's import. Each face parses its
//! wire format into a [`Registration`] (and checks the service it names, in its own
//! field names), then calls [`registration`], which applies the registry's naming rules
//! (`roster_registry::validate`) in one order: address, cluster, weight, metadata.
//!
//! The faces differ in what a refusal calls a field, and imports in two rules (see
//! [`Face::Import`]); the refusal is an [`Invalid`], which each face answers as it
//! always has (HTTP and gRPC through `Error`, an import by skipping the instance).

use std::borrow::Cow;

use roster_registry::validate::Invalid;
use roster_registry::validate::{check_cluster_name, check_ip, check_metadata, check_weight};
use roster_registry::Registration;

/// The face a registration came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Face {
    /// HTTP v1 and v2 parameters: refusals name `ip` and `metadata`.
    Http,
    /// A gRPC instance: refusals name `instance.ip` and `instance.metadata`.
    Grpc,
    /// A sync task's import, named as HTTP's parameters. Kept as the source gives it:
    /// the address is not rewritten to roster's form (the task matches what it holds
    /// against the source by address), and the weight is the source's, unchecked.
    Import,
}

impl Face {
    /// The name a refusal gives `field`.
    fn field(self, field: &str) -> Cow<'static, str> {
        match self {
            Face::Http | Face::Import => Cow::Owned(field.to_string()),
            Face::Grpc => Cow::Owned(format!("instance.{field}")),
        }
    }
}

/// Checks `reg` by the registration rules, as it came through `face`, and puts its
/// address in the form instances are kept in (IPv6 in RFC 5952 form, an IPv4-mapped
/// address as IPv4) unless it is an import. The first rule broken is the refusal.
pub fn registration(
    reg: &mut Registration,
    face: Face,
    max_metadata_bytes: usize,
) -> Result<(), Invalid> {
    if let Cow::Owned(normal) = check_ip(&face.field("ip"), &reg.ip)? {
        if face != Face::Import {
            reg.ip = normal;
        }
    }
    check_cluster_name(&reg.cluster)?;
    if face != Face::Import {
        check_weight(reg.weight)?;
    }
    check_metadata(&face.field("metadata"), &reg.metadata, max_metadata_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roster_registry::validate::Problem;

    fn reg(ip: &str) -> Registration {
        Registration {
            ip: ip.into(),
            port: 8080,
            cluster: "DEFAULT".into(),
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: Default::default(),
            instance_id: None,
            client: None,
            owner: None,
        }
    }

    const FACES: [Face; 3] = [Face::Http, Face::Grpc, Face::Import];

    #[test]
    fn every_face_refuses_a_bad_address_in_its_own_field_name() {
        let refusal = |face| registration(&mut reg("999.1.1.1"), face, 1024).unwrap_err();
        let message = |field: &str| {
            format!("Param '{field}' is illegal, '999.1.1.1' is not an IPv4 address: four decimal numbers from 0 to 255, without leading zeros.")
        };
        assert_eq!(refusal(Face::Http).message, message("ip"));
        assert_eq!(refusal(Face::Grpc).message, message("instance.ip"));
        assert_eq!(refusal(Face::Import).message, message("ip"));
    }

    #[test]
    fn clusters_and_metadata_are_checked_alike_everywhere() {
        for face in FACES {
            let mut bad_cluster = reg("10.0.0.1");
            bad_cluster.cluster = "a_b".into();
            let refusal = registration(&mut bad_cluster, face, 1024).unwrap_err();
            assert_eq!(refusal.field, "clusterName", "{face:?}");

            let mut big = reg("10.0.0.1");
            big.metadata.insert("k".into(), "v".repeat(64));
            let refusal = registration(&mut big, face, 16).unwrap_err();
            assert_eq!(refusal.problem, Problem::Metadata, "{face:?}");
        }
        let mut big = reg("10.0.0.1");
        big.metadata.insert("k".into(), "v".repeat(64));
        let field = |face| registration(&mut big.clone(), face, 16).unwrap_err().field;
        assert_eq!(field(Face::Http), "metadata");
        assert_eq!(field(Face::Grpc), "instance.metadata");
    }

    #[test]
    fn registrations_are_kept_in_normal_form_and_imports_as_the_source_gives_them() {
        for face in [Face::Http, Face::Grpc] {
            let mut mapped = reg("::ffff:10.0.0.1");
            registration(&mut mapped, face, 1024).unwrap();
            assert_eq!(mapped.ip, "10.0.0.1");
        }
        let mut imported = reg("::ffff:10.0.0.1");
        registration(&mut imported, Face::Import, 1024).unwrap();
        assert_eq!(imported.ip, "::ffff:10.0.0.1");
    }

    #[test]
    fn weights_are_checked_except_on_imports() {
        let mut heavy = reg("10.0.0.1");
        heavy.weight = 20_000.0;
        for face in [Face::Http, Face::Grpc] {
            let refusal = registration(&mut heavy.clone(), face, 1024).unwrap_err();
            assert_eq!(refusal.problem, Problem::Weight);
        }
        registration(&mut heavy, Face::Import, 1024).unwrap();
    }
}
