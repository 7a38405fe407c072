# syntax=docker/dockerfile:1
# hotcert-controller: the rollout controller, one static binary.
#
#   docker build -t ghcr.io/hotcert/hotcert-controller:dev .
#   docker run --rm ghcr.io/hotcert/hotcert-controller:dev --help
#
# The rollout controller's manifests (deploy/kustomize, deploy/helm) run
# it from this image as user 65532 with a read-only root
# filesystem: the binary writes nothing to disk. (Keep .bin/, where `make
# k8s-bins` puts test binaries, out of the build context with a .dockerignore.)

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Dependencies first, so that a source change reuses the module cache layer.
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod go mod download
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/hotcert-controller ./cmd/hotcert-controller

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="hotcert-controller" \
      org.opencontainers.image.source="https://github.com/hotcert/hotcert" \
      org.opencontainers.image.description="TLS rotation without restarts, and a rollout controller for workloads that cannot reload"
COPY --from=build /out/hotcert-controller /hotcert-controller
USER 65532:65532
ENTRYPOINT ["/hotcert-controller"]
CMD ["--help"]
