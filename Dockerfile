# Multi-stage build: a static binary on a distroless base, running as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/tollgate ./cmd/tollgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tollgate /tollgate
USER nonroot:nonroot
WORKDIR /data
# In a container the gateway must bind every interface; set --advertise to
# the address clients use to reach the container.
EXPOSE 9092 9089
ENTRYPOINT ["/tollgate"]
CMD ["--listen", "0.0.0.0:9092", "--data-dir", "/data/tollgate-data"]
