// Bilinear sampling as torchvision's RoIAlign kernels do it (CPU arithmetic, step for step): a point
// outside [-1, size] samples nothing; a point in the border band is clamped onto the map.
#pragma once

namespace vnpu::vision {

template <typename T>
struct BilinearCorners {
  bool inside = false;
  int y_low = 0, y_high = 0, x_low = 0, x_high = 0;
  T w1 = 0, w2 = 0, w3 = 0, w4 = 0;
};

template <typename T>
BilinearCorners<T> bilinear_corners(int height, int width, T y, T x) {
  BilinearCorners<T> c;
  // Written as "not inside" so that NaN coordinates sample nothing.
  if (!(y >= -1.0 && y <= height && x >= -1.0 && x <= width)) {
    return c;
  }
  if (y <= 0) {
    y = 0;
  }
  if (x <= 0) {
    x = 0;
  }
  c.inside = true;
  c.y_low = static_cast<int>(y);
  c.x_low = static_cast<int>(x);
  if (c.y_low >= height - 1) {
    c.y_high = c.y_low = height - 1;
    y = static_cast<T>(c.y_low);
  } else {
    c.y_high = c.y_low + 1;
  }
  if (c.x_low >= width - 1) {
    c.x_high = c.x_low = width - 1;
    x = static_cast<T>(c.x_low);
  } else {
    c.x_high = c.x_low + 1;
  }
  const T ly = y - c.y_low;
  const T lx = x - c.x_low;
  const T hy = 1. - ly;
  const T hx = 1. - lx;
  c.w1 = hy * hx;
  c.w2 = hy * lx;
  c.w3 = ly * hx;
  c.w4 = ly * lx;
  return c;
}

// The interpolated value at (y, x) of one plane; 0 outside.
template <typename T>
T bilinear_value(const T* plane, int height, int width, T y, T x) {
  const BilinearCorners<T> c = bilinear_corners(height, width, y, x);
  if (!c.inside) {
    return 0;
  }
  const T v1 = plane[c.y_low * width + c.x_low];
  const T v2 = plane[c.y_low * width + c.x_high];
  const T v3 = plane[c.y_high * width + c.x_low];
  const T v4 = plane[c.y_high * width + c.x_high];
  return c.w1 * v1 + c.w2 * v2 + c.w3 * v3 + c.w4 * v4;
}

// Spreads `g` times each corner weight over one gradient plane.
template <typename T>
void bilinear_scatter(T* plane, int width, const BilinearCorners<T>& c, T g, T count) {
  if (!c.inside) {
    return;
  }
  const T g1 = g * c.w1 / count;
  const T g2 = g * c.w2 / count;
  const T g3 = g * c.w3 / count;
  const T g4 = g * c.w4 / count;
  plane[c.y_low * width + c.x_low] += g1;
  plane[c.y_low * width + c.x_high] += g2;
  plane[c.y_high * width + c.x_low] += g3;
  plane[c.y_high * width + c.x_high] += g4;
}

}  // namespace vnpu::vision
