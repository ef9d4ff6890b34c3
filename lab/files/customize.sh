#!/bin/sh
# mmdebstrap customize hook for the lab host image: a bare Debian server that boots systemd in podman.
# $1 is the root of the image being built. Each step names the problem it prevents.
set -eu
root="$1"

# A fresh machine-id per container, or every lab host shares one (journald, DHCP client ids).
: > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"

# Units that fail or hang in a container (no udev netlink, no module loading, read-only sysfs parts).
for unit in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
    systemd-udev-trigger.service systemd-udev-settle.service systemd-modules-load.service \
    sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
    systemd-remount-fs.service getty@tty1.service console-getty.service \
    systemd-networkd-wait-online.service systemd-timesyncd.service \
    apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done

# MACAddressPolicy=persistent would make `netplan apply` re-MAC eth0 and cut the controller off for 20 s+.
mkdir -p "$root/etc/systemd/network"
ln -sf /dev/null "$root/etc/systemd/network/99-default.link"

# Host keys are made at first boot, so no two lab hosts (or images) share them.
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/etc/systemd/system/ssh.service.d"
cat > "$root/etc/systemd/system/ssh.service.d/lab-hostkeys.conf" <<'UNIT'
[Service]
# Reset the list so the keys exist before the unit's own `sshd -t` check.
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT

# The controller's authorized key is bind-mounted here; sshd's StrictModes wants a 0700 directory.
mkdir -p "$root/root/.ssh"
chmod 0700 "$root/root/.ssh"

# HTTPS to PyPI may pass a TLS-intercepting proxy whose CA the host trusts: the lab bind-mounts the
# host's local CA folder read-only and trusts it at boot. The CA is never baked into the image.
cat > "$root/etc/systemd/system/lab-ca-trust.service" <<'UNIT'
[Unit]
Description=Trust the lab host's local CA certificates
ConditionDirectoryNotEmpty=/usr/local/share/ca-certificates/lab-host
Before=ssh.service

[Service]
Type=oneshot
ExecStart=/usr/sbin/update-ca-certificates

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/lab-ca-trust.service \
  "$root/etc/systemd/system/multi-user.target.wants/lab-ca-trust.service"

# Emptied apt lists must look stale, or apt's cache_valid_time skips the update and finds no packages.
rm -rf "$root"/var/lib/apt/lists/*
mkdir -p "$root/var/lib/apt/lists/partial"
touch -d @0 "$root/var/lib/apt/lists"
rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb

# podman runs lab hosts with --no-hosts, so /etc/hosts is the image's own file and can be managed
# like on a real server (a bind-mounted /etc/hosts cannot be replaced atomically).
cat > "$root/etc/hosts" <<'HOSTS'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
HOSTS
