# Nodewright's image: a static binary on distroless, running as non-root.
# Build: docker build -t nodewright .   (the image cannot be built in this repository's CI)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/nodewright ./cmd/nodewright

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/nodewright /nodewright
USER 65532:65532
ENTRYPOINT ["/nodewright"]
CMD ["controller"]
