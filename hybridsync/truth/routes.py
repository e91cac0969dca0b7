"""Routes out of a VPC: what a VPC-attached function needs to reach and reaches (gateway and
interface endpoints, the team's own routes), and the rules on endpoints and routes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hybridsync.truth.facts import (
    ENDPOINT_SERVICES,
    ENDPOINT_VARIABLE,
    NO_PRIVATE_DNS,
    PAGES,
    PLATFORM_PREFIXES,
    SERVICE_OF_PREFIX,
    STREAM_READ,
)
from hybridsync.truth.findings import Finding
from hybridsync.truth.templates import Id, Templates, listed


@dataclass(frozen=True)
class Network:
    """What a VPC-attached function needs to reach (botocore service -> why) and reaches (-> how)."""

    function: str
    needed: dict[str, str]
    reachable: dict[str, str]

    @property
    def unreachable(self) -> dict[str, str]:
        return {s: why for s, why in self.needed.items() if s not in self.reachable}


def _service_of(action: str) -> str:
    prefix = action.split(":", 1)[0].lower()
    if action in STREAM_READ and prefix == "dynamodb":
        return "dynamodbstreams"
    return SERVICE_OF_PREFIX.get(prefix, prefix)


def needed_services(templates: Templates, function: Id) -> dict[str, str]:
    """The services a function's code calls, by its role: every action it is granted, less what
    Lambda does with that role outside the VPC (logs, traces, network interfaces, the customer key;
    the stream its mapping reads and the destination it writes failed batches to; its dead-letter
    queue)."""
    role = templates.role_of(function)
    if role is None:
        return {}
    platform: set[Id] = set()  # resources only Lambda touches with this role
    mapped = False
    for ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
        if templates.function_of(ident[0], mapping["Properties"]["FunctionName"]) == function:
            mapped = True
            destination = mapping["Properties"].get("DestinationConfig", {}).get("OnFailure", {})
            platform |= templates.mentions(ident[0], destination.get("Destination"))
    properties = (templates.get(function) or {}).get("Properties", {})
    platform |= templates.mentions(function[0], properties.get("DeadLetterConfig", {}).get("TargetArn"))
    needed: dict[str, str] = {}
    for stack, statement in templates.policy_statements(role):
        if statement.get("Effect") != "Allow":
            continue
        touched = templates.mentions(stack, statement.get("Resource"))
        for action in listed(statement.get("Action")):
            if action.lower().startswith(PLATFORM_PREFIXES) or (mapped and action in STREAM_READ):
                continue
            if touched and touched <= platform:
                continue
            needed.setdefault(_service_of(action), f"{action} in its role")
    return needed


def _endpoint_service(templates: Templates, stack: str, endpoint: dict[str, Any]) -> str:
    name = templates.text(stack, endpoint["Properties"]["ServiceName"]).rsplit(".", 1)[-1]
    return ENDPOINT_SERVICES.get(name, name)


def _admits(templates: Templates, group: Id, sources: set[Id], vpc: Any) -> bool:
    """Whether a security group lets HTTPS in from one of `sources` or from its whole VPC."""
    rules: list[tuple[str, dict[str, Any]]] = []
    resource = templates.get(group) or {}
    rules += [(group[0], r) for r in resource.get("Properties", {}).get("SecurityGroupIngress", [])]
    for ident, ingress in templates.resources("AWS::EC2::SecurityGroupIngress"):
        if templates.target(ident[0], ingress["Properties"].get("GroupId")) == group:
            rules.append((ident[0], ingress["Properties"]))
    for stack, rule in rules:
        ports = range(int(rule.get("FromPort", -1)), int(rule.get("ToPort", -1)) + 1)
        if rule.get("IpProtocol") not in ("tcp", "-1") or (
            rule.get("IpProtocol") == "tcp" and 443 not in ports
        ):
            continue
        if templates.target(stack, rule.get("SourceSecurityGroupId")) in sources:
            return True
        cidr = rule.get("CidrIp")
        if cidr == "0.0.0.0/0" or (isinstance(cidr, dict) and templates.mentions(stack, cidr) & vpc):
            return True
    return False


def _vpc_of(templates: Templates, stack: str, groups: list[Any]) -> tuple[set[Id], str | None]:
    """The VPC of security groups: the resources naming it, or its literal id."""
    for group in groups:
        ident = templates.target(stack, group)
        resource = templates.get(ident) if ident else None
        if resource:
            vpc = resource["Properties"].get("VpcId")
            return templates.mentions(ident[0], vpc), vpc if isinstance(vpc, str) else None  # type: ignore[index]
    return set(), None


def reach(
    templates: Templates, stack: str, groups: list[Any], subnets: list[Any], environment: dict[str, Any]
) -> dict[str, str]:
    """The services callers in `groups` and `subnets` reach: through a gateway endpoint on their
    subnets' route tables, through an interface endpoint whose security group admits them (by private
    DNS where the service has it, else by the endpoint's own name given to the client in
    `environment`), or through the team's own routes where the stacks say they are the team's."""
    sources = {g for g in (templates.target(stack, x) for x in groups) if g}
    vpc, vpc_id = _vpc_of(templates, stack, groups)
    for ident in sources:
        given = (templates.get(ident) or {}).get("Metadata", {}).get("hybridsync:routes")
        if given:
            return {"*": given}
    subnet_ids = {s for s in (templates.target(stack, x) for x in subnets) if s}
    tables: dict[Id, set[Id | None]] = {s: set() for s in subnet_ids}  # each subnet's route tables
    for ident, a in templates.resources("AWS::EC2::SubnetRouteTableAssociation"):
        subnet = templates.target(ident[0], a["Properties"]["SubnetId"])
        if subnet in tables:
            tables[subnet].add(templates.target(ident[0], a["Properties"]["RouteTableId"]))
    reached: dict[str, str] = {}
    for ident, endpoint in templates.resources("AWS::EC2::VPCEndpoint"):
        properties = endpoint["Properties"]
        same = templates.mentions(ident[0], properties.get("VpcId")) & vpc or (
            vpc_id is not None and properties.get("VpcId") == vpc_id
        )
        if not same:
            continue
        service, where = _endpoint_service(templates, ident[0], endpoint), f"{ident[0]}/{ident[1]}"
        if properties.get("VpcEndpointType") == "Gateway":
            # a gateway endpoint is a route: only a subnet whose route table has it reaches the
            # service, and Lambda may run a function in any of the subnets it is given, so every one
            # of them must have it, or the calls from the others time out
            routes = {templates.target(ident[0], r) for r in properties.get("RouteTableIds", [])}
            if tables and all(found & routes for found in tables.values()):
                reached[service] = f"gateway endpoint {where}"
            continue
        admitted = any(
            _admits(templates, g, sources, vpc)
            for g in (templates.target(ident[0], x) for x in properties.get("SecurityGroupIds", []))
            if g
        )
        if not admitted:
            continue
        variable = ENDPOINT_VARIABLE.get(service)
        if variable and (ident in templates.mentions(stack, environment.get(variable))):
            reached[service] = f"interface endpoint {where} at ${variable}"
        elif properties.get("PrivateDnsEnabled") and service not in NO_PRIVATE_DNS:
            reached[service] = f"interface endpoint {where} (private DNS)"
    return reached


def network(templates: Templates, stack: str, logical_id: str) -> Network | None:
    """What a function reaches from its VPC (None: it is not in one, and reaches every public endpoint)."""
    function = (stack, logical_id)
    properties = (templates.get(function) or {}).get("Properties", {})
    config = properties.get("VpcConfig")
    if not config:
        return None
    environment = properties.get("Environment", {}).get("Variables", {})
    reached = reach(
        templates, stack, config.get("SecurityGroupIds", []), config.get("SubnetIds", []), environment
    )
    needed = needed_services(templates, function)
    if "*" in reached:  # the team's routes: every service, those it needs named
        reached = {service: reached["*"] for service in needed} | {"*": reached["*"]}
    return Network(f"{stack}/{logical_id}", needed, reached)


def network_rules(templates: Templates) -> list[Finding]:
    """Every VPC-attached function and rotation reaches every service it calls (a gateway endpoint
    from every one of its subnets); an interface endpoint has private DNS only where its service
    supports it, and in a VPC of the templates whose DNS attributes let it answer. Routes the stacks
    say are the team's (`hybridsync:routes`, `-c existing_db_endpoints=false`) reach everything: no
    template shows them, so `hybridsync doctor --deployed` checks them instead."""
    return (
        _endpoint_dns_rules(templates) + _function_route_rules(templates) + _rotation_route_rules(templates)
    )


def _endpoint_dns_rules(templates: Templates) -> list[Finding]:
    """An interface endpoint has private DNS only where its service supports it, in a VPC whose DNS
    attributes let it answer (an S3 one answering its VPC's own calls too)."""
    findings = []
    for ident, endpoint in templates.resources("AWS::EC2::VPCEndpoint"):
        service = _endpoint_service(templates, ident[0], endpoint)
        if endpoint["Properties"].get("VpcEndpointType") == "Interface" and endpoint["Properties"].get(
            "PrivateDnsEnabled", False
        ):
            for vpc in templates.mentions(ident[0], endpoint["Properties"].get("VpcId")):
                attributes = (templates.get(vpc) or {}).get("Properties", {})
                if (templates.get(vpc) or {}).get("Type") != "AWS::EC2::VPC":
                    continue
                # AWS::EC2::VPC's defaults: EnableDnsSupport true, EnableDnsHostnames false
                off = [name for name, default in (("EnableDnsSupport", True), ("EnableDnsHostnames", False))
                       if str(attributes.get(name, default)).lower() != "true"]  # fmt: skip
                if off:
                    findings.append(
                        Finding(
                            "vpc-endpoint-dns",
                            f"{ident[0]}/{ident[1]}",
                            f"an interface endpoint with private DNS in VPC {vpc[0]}/{vpc[1]}, whose "
                            f"{' and '.join(off)} is not true: AWS requires both for private DNS",
                            PAGES["endpoint-vpc-dns"],
                        )
                    )
            if service in NO_PRIVATE_DNS:
                findings.append(
                    Finding(
                        "vpc-endpoint-dns",
                        f"{ident[0]}/{ident[1]}",
                        f"an interface endpoint "
                        f"of {service} with private DNS: {service} does not support it (the deploy "
                        "fails); give clients the endpoint's name instead",
                        PAGES[NO_PRIVATE_DNS[service]],
                    )
                )
            only_inbound = (
                endpoint["Properties"]
                .get("DnsOptions", {})
                .get("PrivateDnsOnlyForInboundResolverEndpoint", "OnlyInboundResolver")
            )
            gateway = any(  # inbound-only DNS sends the VPC's own calls to an S3 gateway endpoint
                e["Properties"].get("VpcEndpointType") == "Gateway"
                and _endpoint_service(templates, other[0], e) == "s3"
                and json.dumps(e["Properties"].get("VpcId"))
                == json.dumps(endpoint["Properties"].get("VpcId"))
                for other, e in templates.resources("AWS::EC2::VPCEndpoint")
            )
            if service == "s3" and only_inbound != "AllResolvers" and not gateway:
                findings.append(
                    Finding(
                        "vpc-endpoint-dns",
                        f"{ident[0]}/{ident[1]}",
                        "an S3 interface endpoint "
                        "with private DNS only for inbound resolvers needs a gateway endpoint in "
                        "its VPC; set PrivateDnsOnlyForInboundResolverEndpoint AllResolvers",
                        PAGES["s3-privatelink"],
                    )
                )
    return findings


def _function_route_rules(templates: Templates) -> list[Finding]:
    """Every VPC-attached function reaches every service its role lets it call."""
    findings = []
    for ident, _ in templates.resources("AWS::Lambda::Function"):
        found = network(templates, *ident)
        for service, why in (found.unreachable if found else {}).items():
            findings.append(
                Finding(
                    "vpc-route",
                    found.function,
                    f"calls {service} ({why}) but has no route to it "  # type: ignore[union-attr]
                    "from its VPC: no gateway endpoint on every one of its subnets' route tables, no "
                    "interface endpoint admitting its "
                    "security group (with private DNS, or its name given to the client), no NAT",
                    PAGES["lambda-vpc"],
                )
            )
    return findings


def _rotation_route_rules(templates: Templates) -> list[Finding]:
    """A hosted rotation in the VPC reaches Secrets Manager."""
    findings = []
    for ident, schedule in templates.resources("AWS::SecretsManager::RotationSchedule"):
        hosted = schedule["Properties"].get("HostedRotationLambda") or {}
        groups = hosted.get("VpcSecurityGroupIds")
        if not groups:
            continue
        reached = reach(templates, ident[0], [groups], [], {})
        if "secretsmanager" not in reached and "*" not in reached:
            findings.append(
                Finding(
                    "vpc-route",
                    f"{ident[0]}/{ident[1]}",
                    "its rotation function runs in the VPC "
                    "and cannot reach Secrets Manager: no endpoint admits its security group",
                    PAGES["rotation-network"],
                )
            )
    return findings
